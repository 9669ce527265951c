// CEvdev: the libevdev headers, plus static inline shims for what Swift cannot import.
#pragma once
#include <libevdev/libevdev.h>
#include <libevdev/libevdev-uinput.h>
// struct input_event, EV_*, KEY_*, SYN_*: the raw record read(2) returns from /dev/input/event*.
#include <linux/input.h>
#include <linux/uinput.h>

/// LIBEVDEV_UINPUT_OPEN_MANAGED is an enum constant that libevdev_uinput_create_from_device
/// takes as an int; Swift imports it as a distinct enum type.
static inline int CEvdev_uinput_open_managed(void) { return LIBEVDEV_UINPUT_OPEN_MANAGED; }
