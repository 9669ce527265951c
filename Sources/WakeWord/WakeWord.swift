// WakeWord owns hearing the gateway's trigger phrases: streaming log-mel features, the model
// file format and inference, per-trigger detectors, and the catalog of trained models.
// It knows nothing of the gateway; the runtime keeps the trigger list current.
