/*
 * test_certs.c - the webhook's certificates (webhook/certgen.c): a generated
 * chain is checked here with OpenSSL directly (X509_verify_cert against the
 * CA alone, with the sslserver purpose), and so are its SANs, EKU, key
 * usage, basic constraints, key type, serials and validity. certgen_check
 * accepts the bundle it made and names the problem in bundles that cannot
 * serve: another CA, another key, expired, not yet valid, another Service,
 * unreadable PEM, a missing field. Bad arguments are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "webhook/certgen.h"

#define DAY (24 * 3600)
#define VALIDITY ((int64_t)365 * DAY)

static const time_t NOW = 1796000000; /* 2026-11-30, a fixed clock */

struct bundle {
    char *dns[4];
    size_t ndns;
    struct certgen_pem pem;
};

static void make(struct bundle *b, const char *svc, const char *ns)
{
    char err[256] = "";

    b->ndns = certgen_dns_names(svc, ns, b->dns);
    assert_int_equal(b->ndns, 4);
    memset(&b->pem, 0, sizeof b->pem);
    assert_int_equal(certgen_generate((const char *const *)b->dns, b->ndns, VALIDITY, NOW, &b->pem,
                                      err, sizeof err),
                     0);
}

static void drop(struct bundle *b)
{
    for (size_t i = 0; i < b->ndns; i++) free(b->dns[i]);
    certgen_pem_free(&b->pem);
}

static X509 *cert_of(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

    BIO_free(b);
    assert_non_null(x);
    return x;
}

static time_t time_of(const ASN1_TIME *t)
{
    struct tm tm;

    assert_int_equal(ASN1_TIME_to_tm(t, &tm), 1);
    return timegm(&tm);
}

/* X509_verify_cert of leaf against ca alone at time at; the error code. */
static int verify(X509 *ca, X509 *leaf, time_t at)
{
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int ok, e;

    X509_STORE_add_cert(st, ca);
    assert_int_equal(X509_STORE_CTX_init(ctx, st, leaf, NULL), 1);
    X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
    X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), at);
    ok = X509_verify_cert(ctx);
    e = X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    return ok == 1 ? X509_V_OK : (e ? e : -1);
}

static void test_chain_verifies(void **state)
{
    struct bundle b;
    X509 *ca, *leaf;

    (void)state;
    make(&b, "reload-agent-webhook", "reload-agent");
    ca = cert_of(b.pem.ca_crt);
    leaf = cert_of(b.pem.tls_crt);
    assert_int_equal(verify(ca, leaf, NOW), X509_V_OK);
    /* the leaf is signed by the CA's key, not self-signed */
    EVP_PKEY *cak = X509_get0_pubkey(ca);
    assert_int_equal(X509_verify(leaf, cak), 1);
    assert_int_equal(X509_check_issued(ca, leaf), X509_V_OK);
    assert_int_not_equal(X509_check_issued(leaf, leaf), X509_V_OK);
    /* and with the CA outside the trust store it does not verify */
    {
        struct bundle other;
        X509 *oca;

        make(&other, "reload-agent-webhook", "reload-agent");
        oca = cert_of(other.pem.ca_crt);
        assert_int_not_equal(verify(oca, leaf, NOW), X509_V_OK);
        X509_free(oca);
        drop(&other);
    }
    X509_free(ca);
    X509_free(leaf);
    drop(&b);
}

static void test_sans_and_cn(void **state)
{
    static const char *const want[] = {"web", "web.team-a", "web.team-a.svc",
                                       "web.team-a.svc.cluster.local"};
    struct bundle b;
    X509 *leaf;
    GENERAL_NAMES *gens;
    char cn[256];

    (void)state;
    make(&b, "web", "team-a");
    leaf = cert_of(b.pem.tls_crt);
    gens = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
    assert_non_null(gens);
    assert_int_equal(sk_GENERAL_NAME_num(gens), 4);
    for (int i = 0; i < 4; i++) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);

        assert_int_equal(g->type, GEN_DNS);
        assert_string_equal((const char *)ASN1_STRING_get0_data(g->d.dNSName), want[i]);
        assert_int_equal(X509_check_host(leaf, want[i], 0, 0, NULL), 1);
    }
    GENERAL_NAMES_free(gens);
    assert_int_equal(X509_check_host(leaf, "web.team-b.svc", 0, 0, NULL), 0);
    assert_int_equal(X509_check_host(leaf, "other.team-a.svc", 0, 0, NULL), 0);
    assert_true(
        X509_NAME_get_text_by_NID(X509_get_subject_name(leaf), NID_commonName, cn, sizeof cn) > 0);
    assert_string_equal(cn, "web.team-a.svc");
    X509_free(leaf);
    drop(&b);
}

static void test_usages_and_constraints(void **state)
{
    struct bundle b;
    X509 *ca, *leaf;
    BASIC_CONSTRAINTS *bc;
    int crit = -1;

    (void)state;
    make(&b, "web", "ns");
    ca = cert_of(b.pem.ca_crt);
    leaf = cert_of(b.pem.tls_crt);
    /* leaf: serverAuth only, digitalSignature only (critical), not a CA */
    assert_int_equal(X509_get_extended_key_usage(leaf), XKU_SSL_SERVER);
    assert_int_equal(X509_get_key_usage(leaf), KU_DIGITAL_SIGNATURE);
    {
        ASN1_BIT_STRING *ku = X509_get_ext_d2i(leaf, NID_key_usage, &crit, NULL);

        assert_non_null(ku);
        assert_int_equal(crit, 1);
        ASN1_BIT_STRING_free(ku);
    }
    bc = X509_get_ext_d2i(leaf, NID_basic_constraints, &crit, NULL);
    assert_non_null(bc);
    assert_int_equal(bc->ca, 0);
    assert_int_equal(crit, 1);
    BASIC_CONSTRAINTS_free(bc);
    assert_int_equal(X509_check_ca(leaf), 0);
    assert_int_equal(X509_check_purpose(leaf, X509_PURPOSE_SSL_SERVER, 0), 1);
    assert_int_equal(X509_check_purpose(leaf, X509_PURPOSE_SSL_CLIENT, 0), 0);
    assert_non_null(X509_get0_subject_key_id(leaf));
    assert_non_null(X509_get0_authority_key_id(leaf));
    assert_int_equal(
        ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(leaf), X509_get0_subject_key_id(ca)), 0);
    /* CA: CA:TRUE pathlen:0, keyCertSign + cRLSign */
    bc = X509_get_ext_d2i(ca, NID_basic_constraints, &crit, NULL);
    assert_non_null(bc);
    assert_true(bc->ca);
    assert_int_equal(crit, 1);
    assert_int_equal(ASN1_INTEGER_get(bc->pathlen), 0);
    BASIC_CONSTRAINTS_free(bc);
    assert_int_equal(X509_get_key_usage(ca), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
    assert_true(X509_check_ca(ca) >= 1);
    X509_free(ca);
    X509_free(leaf);
    drop(&b);
}

static void test_keys_serials_validity(void **state)
{
    struct bundle a, b;
    X509 *ca, *leaf, *leaf2;
    EVP_PKEY *key;
    BIO *bio;
    char curve[64];
    size_t len = 0;

    (void)state;
    make(&a, "web", "ns");
    make(&b, "web", "ns");
    ca = cert_of(a.pem.ca_crt);
    leaf = cert_of(a.pem.tls_crt);
    leaf2 = cert_of(b.pem.tls_crt);
    /* EC P-256 keys, ECDSA-SHA256 signatures; tls.key is PKCS#8 */
    assert_int_equal(EVP_PKEY_get_base_id(X509_get0_pubkey(leaf)), EVP_PKEY_EC);
    assert_int_equal(
        EVP_PKEY_get_utf8_string_param(X509_get0_pubkey(leaf), "group", curve, sizeof curve, &len),
        1);
    assert_string_equal(curve, "prime256v1");
    assert_int_equal(EVP_PKEY_get_base_id(X509_get0_pubkey(ca)), EVP_PKEY_EC);
    assert_int_equal(X509_get_signature_nid(leaf), NID_ecdsa_with_SHA256);
    assert_int_equal(X509_get_signature_nid(ca), NID_ecdsa_with_SHA256);
    assert_non_null(strstr(a.pem.tls_key, "-----BEGIN PRIVATE KEY-----"));
    bio = BIO_new_mem_buf(a.pem.tls_key, -1);
    key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    assert_non_null(key);
    assert_int_equal(X509_check_private_key(leaf, key), 1);
    assert_int_equal(X509_check_private_key(leaf2, key), 0);
    EVP_PKEY_free(key);
    /* validity: from 5 minutes back to now + validity, the same for both */
    assert_int_equal(time_of(X509_get0_notBefore(leaf)), NOW - CERTGEN_BACKDATE_S);
    assert_int_equal(time_of(X509_get0_notAfter(leaf)), NOW + VALIDITY);
    assert_int_equal(time_of(X509_get0_notBefore(ca)), NOW - CERTGEN_BACKDATE_S);
    assert_int_equal(time_of(X509_get0_notAfter(ca)), NOW + VALIDITY);
    assert_int_equal(X509_get_version(leaf), 2);
    /* serials: positive, 16 octets, different each time */
    {
        const ASN1_INTEGER *s1 = X509_get0_serialNumber(leaf), *s2 = X509_get0_serialNumber(leaf2);
        BIGNUM *bn = ASN1_INTEGER_to_BN(s1, NULL);

        assert_false(BN_is_negative(bn));
        assert_int_equal(BN_num_bytes(bn), 16);
        BN_free(bn);
        assert_int_not_equal(ASN1_INTEGER_cmp(s1, s2), 0);
        assert_int_not_equal(ASN1_INTEGER_cmp(s1, X509_get0_serialNumber(ca)), 0);
    }
    /* the chain is valid all along its validity and not outside it */
    assert_int_equal(verify(ca, leaf, NOW + VALIDITY - 60), X509_V_OK);
    assert_int_equal(verify(ca, leaf, NOW + VALIDITY + 60), X509_V_ERR_CERT_HAS_EXPIRED);
    assert_int_equal(verify(ca, leaf, NOW - CERTGEN_BACKDATE_S - 60),
                     X509_V_ERR_CERT_NOT_YET_VALID);
    X509_free(ca);
    X509_free(leaf);
    X509_free(leaf2);
    drop(&a);
    drop(&b);
}

static void test_check_accepts_own(void **state)
{
    struct bundle b;
    char err[256] = "";
    time_t na = 0;

    (void)state;
    make(&b, "web", "ns");
    assert_int_equal(
        certgen_check(&b.pem, (const char *const *)b.dns, b.ndns, NOW, &na, err, sizeof err), 0);
    assert_int_equal(na, NOW + VALIDITY);
    drop(&b);
}

/* certgen_check of p for names of (svc, ns) at time at: -EINVAL with a
 * message holding want. */
static void expect_refusal(struct certgen_pem *p, const char *svc, time_t at, const char *want)
{
    char *dns[4], err[256] = "";
    size_t n = certgen_dns_names(svc, "ns", dns);

    assert_int_equal(certgen_check(p, (const char *const *)dns, n, at, NULL, err, sizeof err),
                     -EINVAL);
    if (!strstr(err, want)) fail_msg("error \"%s\" does not contain \"%s\"", err, want);
    for (size_t i = 0; i < n; i++) free(dns[i]);
}

static void test_check_refusals(void **state)
{
    struct bundle a, b;
    struct certgen_pem mix;
    char *ca_a, *key_a;

    (void)state;
    make(&a, "web", "ns");
    make(&b, "web", "ns");
    ca_a = a.pem.ca_crt;
    key_a = a.pem.tls_key;
    /* another CA */
    mix = (struct certgen_pem){b.pem.ca_crt, a.pem.tls_crt, key_a};
    expect_refusal(&mix, "web", NOW, "tls.crt does not verify against ca.crt");
    /* another key */
    mix = (struct certgen_pem){ca_a, a.pem.tls_crt, b.pem.tls_key};
    expect_refusal(&mix, "web", NOW, "tls.key is not the key of the certificate in tls.crt");
    /* time */
    expect_refusal(&a.pem, "web", NOW + VALIDITY + DAY, "certificate has expired");
    expect_refusal(&a.pem, "web", NOW - DAY, "certificate is not yet valid");
    /* another Service */
    expect_refusal(&a.pem, "api", NOW, "tls.crt is not valid for api");
    /* unreadable or missing fields */
    mix = (struct certgen_pem){ca_a, "not a certificate", key_a};
    expect_refusal(&mix, "web", NOW, "tls.crt holds no readable PEM certificate");
    mix = (struct certgen_pem){"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                               a.pem.tls_crt, key_a};
    expect_refusal(&mix, "web", NOW, "ca.crt holds no readable PEM certificate");
    mix = (struct certgen_pem){ca_a, a.pem.tls_crt, "garbage"};
    expect_refusal(&mix, "web", NOW, "tls.key holds no readable PEM private key");
    mix = (struct certgen_pem){ca_a, a.pem.tls_crt, NULL};
    expect_refusal(&mix, "web", NOW, "tls.key is missing");
    /* the CA as the serving certificate: no SAN, CA:TRUE */
    mix = (struct certgen_pem){ca_a, ca_a, key_a};
    expect_refusal(&mix, "web", NOW, "tls.key is not the key");
    drop(&a);
    drop(&b);
}

static void test_generate_refusals(void **state)
{
    const char *bad[] = {"Web.ns.svc"}, *dash[] = {"web-.ns"}, *ok[] = {"web.ns.svc"};
    const char *many[CERTGEN_MAX_DNS + 1];
    struct certgen_pem p = {0};
    char err[256];

    (void)state;
    for (size_t i = 0; i < CERTGEN_MAX_DNS + 1; i++) many[i] = "web";
    assert_int_equal(certgen_generate(ok, 0, VALIDITY, NOW, &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "need 1 to"));
    assert_int_equal(
        certgen_generate(many, CERTGEN_MAX_DNS + 1, VALIDITY, NOW, &p, err, sizeof err), -EINVAL);
    assert_int_equal(certgen_generate(bad, 1, VALIDITY, NOW, &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "\"Web.ns.svc\" is not a lowercase DNS name"));
    assert_int_equal(certgen_generate(dash, 1, VALIDITY, NOW, &p, err, sizeof err), -EINVAL);
    assert_int_equal(certgen_generate(ok, 1, 60, NOW, &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "validity must be between"));
    assert_null(p.ca_crt);
    assert_int_equal(certgen_generate(ok, 1, CERTGEN_MIN_VALIDITY_S, NOW, &p, err, sizeof err), 0);
    assert_non_null(p.ca_crt);
    certgen_pem_free(&p);
    assert_null(p.tls_key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_verifies),         cmocka_unit_test(test_sans_and_cn),
        cmocka_unit_test(test_usages_and_constraints), cmocka_unit_test(test_keys_serials_validity),
        cmocka_unit_test(test_check_accepts_own),      cmocka_unit_test(test_check_refusals),
        cmocka_unit_test(test_generate_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
