package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t testing.TB, now time.Time) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key}
}

// client is a client certificate for user in groups, valid from notBefore to notAfter.
func (ca testCA) client(t testing.TB, name string, groups []string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name, Organization: groups},
		NotBefore: notBefore, NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func requestWith(certs ...*x509.Certificate) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1/api/v1/pods", nil)
	req.TLS = &tls.ConnectionState{PeerCertificates: certs}
	return req
}

// TestVerifiedCertificates: a remembered certificate still authenticates as its own user, never past its
// expiry, and a certificate the roots did not sign never authenticates, even when it names a user whose
// certificate did.
func TestVerifiedCertificates(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	ca, other := newTestCA(t, now), newTestCA(t, now)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	upstream := x509request.NewDynamic(func() (x509.VerifyOptions, bool) {
		opts := x509request.DefaultVerifyOptions()
		opts.Roots, opts.CurrentTime = roots, clock()
		return opts, true
	}, x509request.CommonNameUserConversion)
	v := newVerifiedCerts(upstream)
	v.now = clock

	alice := ca.client(t, "alice", []string{"team"}, now.Add(-time.Minute), now.Add(30*time.Second))
	forged := other.client(t, "alice", []string{"system:masters"}, now.Add(-time.Minute), now.Add(time.Hour))

	for i := range 3 {
		resp, ok, err := v.AuthenticateRequest(requestWith(alice))
		if err != nil || !ok {
			t.Fatalf("request %d with alice's certificate: ok=%v err=%v", i, ok, err)
		}
		if resp.User.GetName() != "alice" || len(resp.User.GetGroups()) != 1 || resp.User.GetGroups()[0] != "team" {
			t.Fatalf("request %d: user %q groups %q, want alice in team", i, resp.User.GetName(), resp.User.GetGroups())
		}
		// A later step adding a group to this request's user does not add it to the next request's.
		resp.User.GetGroups()[0] = "changed"
		resp.User.GetExtra()["x"] = []string{"y"}
	}
	for i := range 2 {
		if _, ok, err := v.AuthenticateRequest(requestWith(forged)); ok || err == nil {
			t.Fatalf("request %d with a certificate of another CA: ok=%v err=%v, want an error", i, ok, err)
		}
	}
	now = now.Add(time.Minute) // alice's certificate has expired
	if _, ok, err := v.AuthenticateRequest(requestWith(alice)); ok || err == nil {
		t.Fatalf("expired certificate: ok=%v err=%v, want an error", ok, err)
	}
	if _, ok, _ := v.AuthenticateRequest(requestWith()); ok {
		t.Fatal("a request without a certificate was authenticated")
	}
}

// BenchmarkClientCertificate is the authentication of one request with a client certificate: verified
// each time (k8s.io/apiserver's x509 authenticator) or remembered.
func BenchmarkClientCertificate(b *testing.B) {
	t := b
	now := time.Now()
	ca := newTestCA(t, now)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	req := requestWith(ca.client(t, "alice", []string{"team"}, now.Add(-time.Minute), now.Add(time.Hour)))
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = roots
	upstream := x509request.New(opts, x509request.CommonNameUserConversion)
	for name, a := range map[string]interface {
		AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error)
	}{"verified-each-time": upstream, "remembered": newVerifiedCerts(upstream)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok, err := a.AuthenticateRequest(req); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
