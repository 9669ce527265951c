// Debian's libavahi-client (libavahi-client-dev): the client, service browser and resolver, the
// threaded poll they run on, and the error strings. Nothing else.
#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/error.h>
#include <avahi-common/address.h>
#include <avahi-common/strlst.h>
#include <avahi-common/malloc.h>
