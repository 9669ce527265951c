// PulseStreamHandle: a libpulse stream together with the retain that keeps its owner alive while
// the stream's callbacks may fire (they reach the owner through an unretained pointer). Capture
// and playback open and close their streams the same way; this is that way, once.

internal import CPulse

/// Lock held throughout (the connection's main loop lock), like the owner's own members.
struct PulseStreamHandle<Owner: AnyObject> {
    let stream: OpaquePointer
    private let owner: Unmanaged<Owner>

    /// Takes a retain of `owner` until `close`.
    init(_ stream: OpaquePointer, retaining owner: Owner) {
        self.stream = stream
        self.owner = Unmanaged.passRetained(owner)
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
