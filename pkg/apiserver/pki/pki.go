// Package pki keeps rayctl's certificate authority and the certificates it signs: the API server's and
// etcd's serving certificates and one client certificate per identity. Everything lives in one directory
// readable by its owner only, is made once, and is reused on every later start.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
	// renewBefore is how close to expiry a leaf certificate is made anew at start-up.
	renewBefore = 30 * 24 * time.Hour
)

// Authority is the certificate authority of one rayctl data dir.
type Authority struct {
	dir     string
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// KeyPair is a PEM certificate and key, with the paths they are stored at.
type KeyPair struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
}

// LoadOrCreate opens rayctl's main authority in dir (the one that signs the API server's, kubelets' and
// clients' certificates), creating dir (0700) and a new CA the first time.
func LoadOrCreate(dir string) (*Authority, error) { return LoadOrCreateCA(dir, "rayctl-ca") }

// LoadOrCreateCA opens the authority in dir, creating dir (0700) and a new CA called commonName the
// first time. Each authority trusts only what it signed: etcd has one of its own, so that no
// certificate the API server accepts opens etcd.
func LoadOrCreateCA(dir, commonName string) (*Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	a := &Authority{dir: dir}
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certPEM, keyPEM, err := readPair(certFile, keyFile)
	switch {
	case err == nil:
		cert, err := parseCert(certPEM)
		if err != nil {
			return nil, &BrokenCAError{Dir: dir, Problem: "ca.crt: " + err.Error()}
		}
		key, err := parseKey(keyPEM)
		if err != nil {
			return nil, &BrokenCAError{Dir: dir, Problem: "ca.key: " + err.Error()}
		}
		if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) || !cert.IsCA {
			return nil, &BrokenCAError{Dir: dir, Problem: "ca.key is not the key of the CA certificate ca.crt"}
		}
		a.cert, a.key, a.certPEM = cert, key, certPEM
		return a, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	// Neither file: a new CA. One without the other: the CA is lost, not to be replaced silently.
	for _, pair := range [][2]string{{certFile, keyFile}, {keyFile, certFile}} {
		if _, err := os.Stat(pair[0]); err == nil {
			return nil, &BrokenCAError{Dir: dir, Problem: fmt.Sprintf("%s is missing while %s is there", filepath.Base(pair[1]), filepath.Base(pair[0]))}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	a.cert, a.key = cert, key
	a.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePair(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), a.certPEM, encodeKey(key)); err != nil {
		return nil, err
	}
	return a, nil
}

// BrokenCAError says the CA files in Dir are there but cannot be used: one is missing, unreadable, or
// the key does not belong to the certificate. LoadOrCreate returns it rather than making a new CA in
// their place, which would silently change every identity of the data dir.
type BrokenCAError struct {
	// Dir is the pki directory.
	Dir string
	// Problem says what is wrong.
	Problem string
}

func (e *BrokenCAError) Error() string { return "the CA in " + e.Dir + " is broken: " + e.Problem }

// CertPEM returns the CA certificate in PEM.
func (a *Authority) CertPEM() []byte { return a.certPEM }

// CertFile returns the path of the CA certificate.
func (a *Authority) CertFile() string { return filepath.Join(a.dir, "ca.crt") }

// Pool returns a pool holding only the CA certificate.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.cert)
	return p
}

// Serving returns the serving certificate called name, valid for hosts and ips, making it if it is
// missing, expiring soon, or does not cover them.
func (a *Authority) Serving(name string, hosts []string, ips []net.IP) (*KeyPair, error) {
	return a.ensure(name, func(c *x509.Certificate) bool { return covers(c, hosts, ips) }, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    hosts,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Peer returns the certificate called name for a server that is also a client of servers like itself
// (etcd's raft peers), valid for hosts and ips, making it if it is missing, expiring soon, or does not
// cover them.
func (a *Authority) Peer(name string, hosts []string, ips []net.IP) (*KeyPair, error) {
	return a.ensure(name, func(c *x509.Certificate) bool {
		return covers(c, hosts, ips) && slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    hosts,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// covers says c names every one of hosts and ips.
func covers(c *x509.Certificate, hosts []string, ips []net.IP) bool {
	for _, h := range hosts {
		if !slices.Contains(c.DNSNames, h) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// Client returns the client certificate called name for user with groups (the subject's common name and
// organizations, as Kubernetes reads them), making it if it is missing, expiring soon, or names another identity.
func (a *Authority) Client(name, user string, groups []string) (*KeyPair, error) {
	return a.ensure(name, func(c *x509.Certificate) bool {
		return c.Subject.CommonName == user && slices.Equal(c.Subject.Organization, groups)
	}, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (a *Authority) ensure(name string, fits func(*x509.Certificate) bool, tmpl *x509.Certificate) (*KeyPair, error) {
	kp := &KeyPair{CertFile: filepath.Join(a.dir, name+".crt"), KeyFile: filepath.Join(a.dir, name+".key")}
	if certPEM, keyPEM, err := readPair(kp.CertFile, kp.KeyFile); err == nil {
		if cert, _, err := parsePair(certPEM, keyPEM); err == nil && fits(cert) &&
			time.Until(cert.NotAfter) > renewBefore && cert.CheckSignatureFrom(a.cert) == nil {
			kp.CertPEM, kp.KeyPEM = certPEM, keyPEM
			return kp, nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(leafValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, err
	}
	kp.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kp.KeyPEM = encodeKey(key)
	if err := writePair(kp.CertFile, kp.KeyFile, kp.CertPEM, kp.KeyPEM); err != nil {
		return nil, err
	}
	return kp, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

func encodeKey(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func readPair(certFile, keyFile string) ([]byte, []byte, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, nil, err
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return nil, errors.New("not PEM")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("key cannot sign")
	}
	return signer, nil
}

// writePair writes both files with owner-only permissions, each through a rename so a crash never leaves
// half a file behind.
func writePair(certFile, keyFile string, certPEM, keyPEM []byte) error {
	if err := WriteFileAtomic(keyFile, keyPEM); err != nil {
		return err
	}
	return WriteFileAtomic(certFile, certPEM)
}

// WriteFileAtomic writes data to path with mode 0600 through a temporary file and a rename.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// SigningKey returns the private key called name (name.key beside the CA, owner-only), making it the
// first time: the key that signs service-account tokens, say. A key file that cannot be read as an
// ECDSA key is an error, not replaced, since every token it signed would silently stop working.
func (a *Authority) SigningKey(name string) (*ecdsa.PrivateKey, error) {
	path := filepath.Join(a.dir, name+".key")
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := parseKey(b)
		if ec, ok := k.(*ecdsa.PrivateKey); err == nil && ok {
			return ec, nil
		}
		return nil, fmt.Errorf("%s is not an ECDSA private key in PEM (PKCS #8)", path)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return key, WriteFileAtomic(path, encodeKey(key))
}
