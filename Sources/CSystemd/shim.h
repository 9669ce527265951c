// libsystemd's sd_notify and sd_watchdog_enabled (Debian: libsystemd-dev), nothing else.
#include <systemd/sd-daemon.h>
