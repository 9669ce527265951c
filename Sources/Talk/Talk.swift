// Talk owns the conversation: the push-to-talk state machine, the talk turn (capture →
// uplink → chat.send → reply → speech) and the session-switch coordinator.
