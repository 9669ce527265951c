// This build's version: `clawvoice --version`, `status`, the connect params; packaging/build-deb.sh
// reads it from this file.

/// This build's version.
public enum ClawvoiceVersion {
    public static let current = "0.1.0"
}
