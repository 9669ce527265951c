// The schema, as an ordered list of migrations. Append only: a released migration is never
// edited, because databases in the field have already applied it.

enum Schema {
    /// Migration `i` moves the database from version `i` to `i + 1`.
    static let migrations: [String] = [
        // v1: identity, gateways, per-gateway device tokens.
        """
        CREATE TABLE identity(
            id INTEGER PRIMARY KEY CHECK(id = 1),
            seed BLOB NOT NULL,
            public_key BLOB NOT NULL,
            device_id TEXT NOT NULL,
            instance_id TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL
        );
        CREATE TABLE gateways(
            name TEXT PRIMARY KEY,
            url TEXT NOT NULL,
            tls_fingerprint TEXT,
            allow_insecure INTEGER NOT NULL DEFAULT 0,
            bootstrap_token TEXT,
            shared_token TEXT,
            password TEXT,
            is_active INTEGER NOT NULL DEFAULT 0,
            main_session_key TEXT,
            added_at_ms INTEGER NOT NULL
        );
        -- At most one active gateway, enforced by the database rather than by every caller.
        CREATE UNIQUE INDEX gateways_single_active ON gateways(is_active) WHERE is_active = 1;
        CREATE TABLE tokens(
            gateway TEXT NOT NULL REFERENCES gateways(name) ON DELETE CASCADE,
            role TEXT NOT NULL,
            token TEXT NOT NULL,
            scopes TEXT NOT NULL,
            updated_at_ms INTEGER NOT NULL,
            PRIMARY KEY(gateway, role)
        );
        """,
        // v2: the durable outbox of talk turns, per gateway, in order.
        """
        CREATE TABLE outbox(
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            gateway TEXT NOT NULL REFERENCES gateways(name) ON DELETE CASCADE,
            idempotency_key TEXT NOT NULL UNIQUE,
            session_key TEXT NOT NULL,
            message TEXT NOT NULL,
            attachments TEXT,
            thinking TEXT,
            created_at_ms INTEGER NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending',
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at_ms INTEGER NOT NULL DEFAULT 0,
            sent_at_ms INTEGER,
            run_id TEXT,
            last_error TEXT
        );
        CREATE INDEX outbox_gateway_order ON outbox(gateway, seq);
        """,
        // v3: the transcript cache: recent sessions and messages per gateway.
        """
        CREATE TABLE cached_sessions(
            gateway TEXT NOT NULL REFERENCES gateways(name) ON DELETE CASCADE,
            session_key TEXT NOT NULL,
            title TEXT,
            updated_at_ms INTEGER,
            refreshed_at_ms INTEGER NOT NULL,
            PRIMARY KEY(gateway, session_key)
        );
        CREATE TABLE cached_messages(
            gateway TEXT NOT NULL REFERENCES gateways(name) ON DELETE CASCADE,
            session_key TEXT NOT NULL,
            position INTEGER NOT NULL,
            message_id TEXT,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            timestamp_ms INTEGER,
            idempotency_key TEXT,
            run_id TEXT,
            PRIMARY KEY(gateway, session_key, position)
        );
        CREATE INDEX cached_messages_id ON cached_messages(gateway, message_id);
        """,
        // v4: the chat session this node talks to on each gateway (`clawvoice session use`), kept
        // across restarts; NULL means the gateway's main session.
        """
        ALTER TABLE gateways ADD COLUMN current_session_key TEXT;
        """,
        // v5: the node's own settings kept across restarts (`clawvoice mute`, `volume`), one row per key.
        """
        CREATE TABLE node_settings(
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """,
    ]

    /// The version this build writes; a file with a higher version came from a newer clawvoice.
    static var latestVersion: Int { migrations.count }
}
