// PulseStreamHandle: a libpulse stream together with the retain that keeps its owner alive while
// the stream's callbacks may fire (they reach the owner through an unretained pointer). Capture
// and playback open and close their streams the same way; this is that way, once.

internal import CPulse

/// What owns a stream: told of each state change of it (lock held, on the main loop thread).
protocol PulseStreamOwner: AnyObject {
    func streamStateChanged(_ stream: OpaquePointer?)
}

/// Lock held throughout (the connection's main loop lock), like the owner's own members.
struct PulseStreamHandle<Owner: PulseStreamOwner> {
    let stream: OpaquePointer
    private let owner: Unmanaged<Owner>

    /// Takes a retain of `owner` until `close`, and sends the stream's state changes to it. (A C
    /// callback cannot capture `Owner`: it finds the owner through the protocol.)
    init(_ stream: OpaquePointer, retaining owner: Owner) {
        self.stream = stream
        self.owner = Unmanaged.passRetained(owner)
        pa_stream_set_state_callback(stream, { s, userdata in
            guard let userdata, let owner = Unmanaged<AnyObject>.fromOpaque(userdata).takeUnretainedValue() as? any PulseStreamOwner else { return }
            owner.streamStateChanged(s)
        }, self.owner.toOpaque())
    }

    /// The pointer the stream's callbacks get back (the owner, unretained).
    var userdata: UnsafeMutableRawPointer { owner.toOpaque() }

    /// Clears the state callback and, with `clearCallbacks`, the owner's others, disconnects the
    /// stream if it is still good and releases it, then the owner's retain. That may be the last
    /// reference to the owner: call it last, with nothing of the owner's used after.
    func close(clearCallbacks: (OpaquePointer) -> Void) {
        pa_stream_set_state_callback(stream, nil, nil)
        clearCallbacks(stream)
        if PA_STREAM_IS_GOOD(pa_stream_get_state(stream)) != 0 { pa_stream_disconnect(stream) }
        pa_stream_unref(stream)
        owner.release()
    }
}
