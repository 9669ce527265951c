// Buttons owns push-to-talk keys: evdev input devices (headset media keys, keyboards), their
// discovery and hot-plugging, and turning key presses into start/stop requests.
