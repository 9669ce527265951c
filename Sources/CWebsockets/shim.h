// CWebsockets: libwebsockets, plus one-line shims for what Swift cannot import (macros).
#pragma once
#include <libwebsockets.h>

static inline int cv_lws_write_text(struct lws *wsi, unsigned char *buf, size_t len) { return lws_write(wsi, buf, len, LWS_WRITE_TEXT); }
static inline int cv_lws_write_binary(struct lws *wsi, unsigned char *buf, size_t len) { return lws_write(wsi, buf, len, LWS_WRITE_BINARY); }
static inline int cv_lws_write_ping(struct lws *wsi, unsigned char *buf, size_t len) { return lws_write(wsi, buf, len, LWS_WRITE_PING); }
static inline size_t cv_lws_pre(void) { return LWS_PRE; }
static inline int cv_lws_write_raw(struct lws *wsi, unsigned char *buf, size_t len) { return lws_write(wsi, buf, len, LWS_WRITE_RAW); }
// libwebsockets.h brings in <openssl/ssl.h>; SNI is a macro there, and CSSL has no shims.
static inline long cv_ssl_set_tlsext_host_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
