// GatewayCrypto owns the protocol's cryptography, the one OpenSSL edge besides TLS: the node's
// Ed25519 device identity, the exact string it signs in `connect` (spec 2.3, 2.4) and SHA-256.
// It sits beside GatewayProtocol rather than in it so that the wire values (and ClawvoiceCore,
// which builds on them) link no C library. No I/O: the store keeps the seed.
