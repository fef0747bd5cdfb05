#ifndef CLIBWEBSOCKETS_SHIM_H
#define CLIBWEBSOCKETS_SHIM_H
/* libwebsockets 4.1 for Swift. Only what the importer can't see: function-like
 * macros and constants defined through them. Names: CLibWebSockets_<original>. */
#include <libwebsockets.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <openssl/ssl.h>

/** Bytes lws needs in front of every buffer passed to lws_write(). */
static inline size_t CLibWebSockets_LWS_PRE(void) { return LWS_PRE; }

/** Content length meaning "not known" for lws_add_http_common_headers(). */
static inline lws_filepos_t CLibWebSockets_LWS_ILLEGAL_HTTP_CONTENT_LEN(void) {
    return LWS_ILLEGAL_HTTP_CONTENT_LEN;
}

/** Write mode for bytes already framed by the caller (a macro alias of LWS_WRITE_HTTP). */
static inline enum lws_write_protocol CLibWebSockets_LWS_WRITE_RAW(void) { return LWS_WRITE_RAW; }

/** SSL_OP_* flags that turn off everything older than TLS 1.2 (vhost ssl_options_set). */
static inline long CLibWebSockets_TLS_NO_LEGACY_PROTOCOLS(void) {
    return (long)(SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1);
}

/** LWS_SERVER_OPTION_* values that are composed through macros. */
static inline uint64_t CLibWebSockets_OPTION_LIBEV(void) { return LWS_SERVER_OPTION_LIBEV; }
static inline uint64_t CLibWebSockets_OPTION_DISABLE_IPV6(void) { return LWS_SERVER_OPTION_DISABLE_IPV6; }
static inline uint64_t CLibWebSockets_OPTION_DO_SSL_GLOBAL_INIT(void) { return LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT; }
static inline uint64_t CLibWebSockets_OPTION_EXPLICIT_VHOSTS(void) { return LWS_SERVER_OPTION_EXPLICIT_VHOSTS; }
static inline uint64_t CLibWebSockets_OPTION_ALLOW_NON_SSL_ON_SSL_PORT(void) { return LWS_SERVER_OPTION_ALLOW_NON_SSL_ON_SSL_PORT; }

#endif
