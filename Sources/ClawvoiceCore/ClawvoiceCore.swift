// ClawvoiceCore owns the decisions: the pure machines (talk turn, gateway connection, outbox,
// realtime call, gateway browse, push-to-talk key, endpointer) and the value types they take and
// return (PCM buffers, outbox rows, call wire values, log levels). Each machine takes events with
// the time as a number and returns actions; the services around it carry them out.
// It must not do I/O, read a clock, start a task or import a C library, not even through another
// module: it depends only on Foundation, Synchronization and GatewayProtocol (wire values, also
// C-free). tests/core-without-c.sh builds it and its tests in a package that declares no C library.
