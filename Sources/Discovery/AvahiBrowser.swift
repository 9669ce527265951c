// AvahiBrowser: the thin wrapper over libavahi-client (CAvahi). It owns the threaded poll, the
// client, the service browsers and the resolvers, and turns every Avahi callback into a
// DiscoveryMachine.Input on one stream. No decisions here: what to resolve and when to stop are
// the machine's. libavahi-client reaches avahi-daemon over the D-Bus system bus, at
// $DBUS_SYSTEM_BUS_ADDRESS when set (the tests point it at a private bus), else /run/dbus.

import CAvahi
public import ClawvoiceCore
public import Foundation
#if canImport(Glibc)
import Glibc
#endif

public struct DiscoveryError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }

    /// The one line for a client that could not reach the daemon, with the fix.
    static func connect(code: Int32, environment: [String: String]) -> DiscoveryError {
        let bus = environment["DBUS_SYSTEM_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 } ?? "unix:path=/run/dbus/system_bus_socket"
        let reason = String(cString: avahi_strerror(code))
        // unix:path=… without a socket there: no bus at all, so the daemon cannot be up either.
        if let path = bus.split(separator: ",").first.flatMap({ $0.hasPrefix("unix:path=") ? String($0.dropFirst(10)) : nil }),
           !FileManager.default.fileExists(atPath: path) {
            return DiscoveryError("cannot browse for gateways: the D-Bus system bus is not running (no \(path)), and avahi-daemon needs it; start both: sudo systemctl enable --now dbus avahi-daemon (Debian: sudo apt install avahi-daemon)")
        }
        if [AVAHI_ERR_NO_DAEMON, AVAHI_ERR_DISCONNECTED, AVAHI_ERR_DBUS_ERROR].contains(Int(code)) {
            return DiscoveryError("cannot browse for gateways: avahi-daemon is not running (\(reason)); start it: sudo systemctl enable --now avahi-daemon (Debian: sudo apt install avahi-daemon)")
        }
        return DiscoveryError("cannot browse for gateways: Avahi: \(reason)")
    }
}

/// Not Sendable: one owner (the browse that made it) calls it; avahi's poll thread reaches it
/// only through its callbacks, which run with the poll's lock held, as every method here takes it.
public final class AvahiBrowser {
    public let events: AsyncStream<DiscoveryMachine.Input>
    private let continuation: AsyncStream<DiscoveryMachine.Input>.Continuation
    private let poll: OpaquePointer
    private var client: OpaquePointer?
    // Touched only with the poll's lock held (or from its callbacks, which hold it).
    private var browsers: [OpaquePointer] = []
    private var browserDomains: [OpaquePointer: String] = [:]
    private var resolvers: [ServiceKey: OpaquePointer] = [:]
    private var closed = false

    /// Connects to avahi-daemon; throws the one-line DiscoveryError when it cannot.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws(DiscoveryError) {
        (events, continuation) = AsyncStream.makeStream(of: DiscoveryMachine.Input.self, bufferingPolicy: .unbounded)
        guard let p = avahi_threaded_poll_new() else { throw DiscoveryError("cannot browse for gateways: out of memory") }
        poll = p
        var error: Int32 = 0
        let me = Unmanaged.passUnretained(self).toOpaque()
        let c = avahi_client_new(avahi_threaded_poll_get(p), AvahiClientFlags(rawValue: 0), { _, state, userdata in
            guard let userdata, state == AVAHI_CLIENT_FAILURE else { return }
            let me = Unmanaged<AvahiBrowser>.fromOpaque(userdata).takeUnretainedValue()
            me.continuation.yield(.daemonLost(message: "avahi-daemon went away; start it again: sudo systemctl restart avahi-daemon"))
        }, me, &error)
        // A throwing init still runs deinit (every property is set): leave `closed` true and the
        // poll freed here, so close() does nothing.
        guard let c else {
            avahi_threaded_poll_free(p)
            closed = true
            continuation.finish()
            throw DiscoveryError.connect(code: error, environment: environment)
        }
        client = c
        guard avahi_threaded_poll_start(p) == 0 else {
            avahi_client_free(c)
            client = nil
            avahi_threaded_poll_free(p)
            closed = true
            continuation.finish()
            throw DiscoveryError("cannot browse for gateways: could not start Avahi's event thread")
        }
    }

    deinit { close() }

    private func locked<T>(_ body: () -> T) -> T {
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        return body()
    }

    /// Starts a browser for _openclaw-gw._tcp in `domain` ("local." or a wide-area domain).
    public func browse(domain: String) {
        locked {
            guard !closed, let client else { return }
            let d = domain.hasSuffix(".") ? String(domain.dropLast()) : domain
            let me = Unmanaged.passUnretained(self).toOpaque()
            let b = avahi_service_browser_new(client, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC),
                                              DiscoveryNames.serviceType, d, AvahiLookupFlags(rawValue: 0), { b, iface, proto, event, name, type, domain, _, userdata in
                guard let userdata else { return }
                let me = Unmanaged<AvahiBrowser>.fromOpaque(userdata).takeUnretainedValue()
                me.browserEvent(b, iface, proto, event, name, type, domain)
            }, me)
            if let b {
                browsers.append(b)
                browserDomains[b] = domain
            } else {
                continuation.yield(.browserFailed(domain: domain, message: String(cString: avahi_strerror(avahi_client_errno(client)))))
            }
        }
    }

    /// Called on the poll thread, lock held.
    private func browserEvent(_ b: OpaquePointer?, _ iface: AvahiIfIndex, _ proto: AvahiProtocol, _ event: AvahiBrowserEvent,
                              _ name: UnsafePointer<CChar>?, _ type: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?) {
        let browsed = b.flatMap { browserDomains[$0] } ?? DiscoveryNames.localDomain
        switch event {
        case AVAHI_BROWSER_NEW, AVAHI_BROWSER_REMOVE:
            guard let name, let type, let domain else { return }
            let key = ServiceKey(interface: iface, proto: proto, name: String(cString: name), type: String(cString: type),
                                 domain: String(cString: domain))
            continuation.yield(event == AVAHI_BROWSER_NEW ? .browserNew(key) : .browserRemove(key))
        case AVAHI_BROWSER_ALL_FOR_NOW:
            continuation.yield(.allForNow(domain: browsed))
        case AVAHI_BROWSER_FAILURE:
            let code = client.map { avahi_client_errno($0) } ?? 0
            continuation.yield(.browserFailed(domain: browsed, message: String(cString: avahi_strerror(code))))
        default:
            break  // CACHE_EXHAUSTED: nothing to decide on
        }
    }

    /// Resolves one service (host, address, port, TXT); the answer comes back as .resolved. The
    /// resolver stays and reports changes until stopResolving.
    public func resolve(_ key: ServiceKey) {
        locked {
            guard !closed, let client, resolvers[key] == nil else { return }
            let me = Unmanaged.passUnretained(self).toOpaque()
            let d = key.domain.hasSuffix(".") ? String(key.domain.dropLast()) : key.domain
            // Each family's service resolves to that family's address; unspecified (wide-area) to either.
            let aproto = key.proto >= 0 ? key.proto : AvahiProtocol(AVAHI_PROTO_UNSPEC)
            let r = avahi_service_resolver_new(client, key.interface, key.proto, key.name, key.type, d, aproto,
                                               AvahiLookupFlags(rawValue: 0), { r, iface, proto, event, name, type, domain, host, address, port, txt, _, userdata in
                guard let userdata else { return }
                let me = Unmanaged<AvahiBrowser>.fromOpaque(userdata).takeUnretainedValue()
                me.resolverEvent(r, event, host, address, port, txt)
            }, me)
            if let r { resolvers[key] = r } else {
                continuation.yield(.resolveFailed(key, message: String(cString: avahi_strerror(avahi_client_errno(client)))))
            }
        }
    }

    /// Called on the poll thread, lock held.
    private func resolverEvent(_ r: OpaquePointer?, _ event: AvahiResolverEvent, _ host: UnsafePointer<CChar>?,
                               _ address: UnsafePointer<AvahiAddress>?, _ port: UInt16, _ txt: UnsafeMutablePointer<AvahiStringList>?) {
        guard let r, let key = resolvers.first(where: { $0.value == r })?.key else { return }
        if event == AVAHI_RESOLVER_FAILURE {
            let code = client.map { avahi_client_errno($0) } ?? 0
            continuation.yield(.resolveFailed(key, message: String(cString: avahi_strerror(code))))
            return
        }
        var addressText: String?
        if let address {
            var buf = [CChar](repeating: 0, count: Int(AVAHI_ADDRESS_STR_MAX))
            if avahi_address_snprint(&buf, buf.count, address) != nil { addressText = Self.text(buf) }
        }
        var strings: [String] = []
        var item = txt
        while let i = item {
            let size = avahi_string_list_get_size(i)
            if let text = avahi_string_list_get_text(i) {
                strings.append(String(decoding: UnsafeBufferPointer(start: text, count: size), as: UTF8.self))
            }
            item = avahi_string_list_get_next(i)
        }
        // Avahi keeps TXT strings in reverse order of the record; put them back.
        strings.reverse()
        var ifname: String?
        if key.interface >= 0 {
            var buf = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
            if if_indextoname(UInt32(key.interface), &buf) != nil { ifname = Self.text(buf) }
        }
        continuation.yield(.resolved(key, Resolution(host: host.map { String(cString: $0) } ?? "", address: addressText,
                                                     port: Int(port), txt: strings, interfaceName: ifname)))
    }

    static func text(_ buf: [CChar]) -> String {
        String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Posts inputs of our own (start, tick) into the same inbox as Avahi's events; Sendable, so
    /// a ticking child can hold it without the browser.
    var inbox: AsyncStream<DiscoveryMachine.Input>.Continuation { continuation }

    public func stopResolving(_ key: ServiceKey) {
        locked {
            if let r = resolvers.removeValue(forKey: key) { avahi_service_resolver_free(r) }
        }
    }

    /// Stops the poll thread and frees everything; the stream ends.
    public func close() {
        // Only close() sets `closed` after init, and it runs once per browser (deinit or the owner).
        if closed && client == nil { return }
        let wasOpen: Bool = locked {
            if closed { return false }
            closed = true
            return true
        }
        guard wasOpen else { return }
        avahi_threaded_poll_stop(poll)
        for r in resolvers.values { avahi_service_resolver_free(r) }
        resolvers = [:]
        for b in browsers { avahi_service_browser_free(b) }
        browsers = []
        if let client { avahi_client_free(client) }
        client = nil
        avahi_threaded_poll_free(poll)
        continuation.finish()
    }
}
