// CSSL: the OpenSSL headers clawvoice uses (Ed25519 via EVP, SHA-256, X.509 for TLS pinning).
#pragma once
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/pem.h>
