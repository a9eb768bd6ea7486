package auth

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Every request that presents a client certificate is authenticated by it, and k8s.io/apiserver's x509
// authenticator verifies the certificate's chain each time: an ECDSA signature check and a chain build
// per request, although a client sends the same certificate on every request of its connection (the TLS
// handshake requests a certificate but leaves verification to the authenticator). verifiedCerts remembers
// the answer for a certificate that verified against the (fixed) roots, for at most verifiedCertTTL and
// never beyond the certificate's own validity: a request presenting those exact bytes gets the same
// identity without the signature check. A certificate that failed is not remembered (it is checked again
// each time), nor is one presented with intermediates (its answer depends on them too).
const (
	verifiedCertTTL = time.Minute
	// verifiedCertMax bounds the cache; when full it starts again empty (rayctl has a handful of
	// identities, so this is reached only by someone minting certificates).
	verifiedCertMax = 1024
)

type verifiedCert struct {
	resp      *authenticator.Response
	notBefore time.Time
	until     time.Time // the certificate's NotAfter, or when the entry was made plus verifiedCertTTL
}

type verifiedCerts struct {
	verify authenticator.Request
	now    func() time.Time

	mu    sync.RWMutex
	certs map[string]verifiedCert // by the certificate's DER bytes
}

func newVerifiedCerts(verify authenticator.Request) *verifiedCerts {
	return &verifiedCerts{verify: verify, now: time.Now, certs: map[string]verifiedCert{}}
}

func (v *verifiedCerts) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) != 1 {
		return v.verify.AuthenticateRequest(req)
	}
	leaf := req.TLS.PeerCertificates[0]
	now := v.now()
	v.mu.RLock()
	c, ok := v.certs[string(leaf.Raw)]
	v.mu.RUnlock()
	if ok && !now.Before(c.notBefore) && now.Before(c.until) {
		return copyResponse(c.resp), true, nil
	}
	resp, ok, err := v.verify.AuthenticateRequest(req)
	if !ok || err != nil {
		return resp, ok, err
	}
	until := now.Add(verifiedCertTTL)
	if leaf.NotAfter.Before(until) {
		until = leaf.NotAfter
	}
	v.mu.Lock()
	if len(v.certs) >= verifiedCertMax {
		clear(v.certs)
	}
	v.certs[string(leaf.Raw)] = verifiedCert{resp: copyResponse(resp), notBefore: leaf.NotBefore, until: until}
	v.mu.Unlock()
	return resp, true, nil
}

// copyResponse is a copy of r that its receiver may change without changing r.
func copyResponse(r *authenticator.Response) *authenticator.Response {
	u := r.User
	var extra map[string][]string
	if e := u.GetExtra(); e != nil {
		extra = make(map[string][]string, len(e))
		for k, v := range e {
			extra[k] = slices.Clone(v)
		}
	}
	return &authenticator.Response{
		Audiences: slices.Clone(r.Audiences),
		User:      &user.DefaultInfo{Name: u.GetName(), UID: u.GetUID(), Groups: slices.Clone(u.GetGroups()), Extra: extra},
	}
}
