package etcd

import (
	"net"
	"os"
	"path/filepath"

	"github.com/rayctl/rayctl/pkg/apiserver/pki"
)

// Credentials are etcd's certificates: a CA of etcd's own, which signs nothing else, the client port's
// serving certificate, the raft peer port's certificate, and the one client certificate that opens etcd,
// the API server's. No certificate of rayctl's main CA (the kubeconfig's, a component's) is accepted.
type Credentials struct {
	// CA is etcd's authority.
	CA *pki.Authority
	// Server serves etcd's client port; Peer its raft port.
	Server, Peer *pki.KeyPair
	// APIServerClient is the API server's client certificate towards etcd.
	APIServerClient *pki.KeyPair
}

// legacyFiles are etcd certificates that older data dirs kept in the main CA's directory, signed by it.
var legacyFiles = []string{"etcd-server.crt", "etcd-server.key", "apiserver-etcd-client.crt", "apiserver-etcd-client.key"}

// IssueCredentials opens etcd's CA in dir (making it the first time) and the certificates it signs,
// renewing any that are missing or expiring. Certificates an older rayctl kept in mainDir, signed by the
// main CA, are removed: they no longer open etcd and should not linger.
func IssueCredentials(dir, mainDir string) (*Credentials, error) {
	ca, err := pki.LoadOrCreateCA(dir, "rayctl-etcd-ca")
	if err != nil {
		return nil, err
	}
	loop := []net.IP{net.IPv4(127, 0, 0, 1)}
	c := &Credentials{CA: ca}
	if c.Server, err = ca.Serving("server", []string{"localhost"}, loop); err != nil {
		return nil, err
	}
	if c.Peer, err = ca.Peer("peer", []string{"localhost"}, loop); err != nil {
		return nil, err
	}
	if c.APIServerClient, err = ca.Client("apiserver-etcd-client", "system:apiserver-etcd-client", nil); err != nil {
		return nil, err
	}
	for _, f := range legacyFiles {
		if err := os.Remove(filepath.Join(mainDir, f)); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	return c, nil
}

// ServerConfig fills in c's certificate fields from the credentials.
func (cr *Credentials) ServerConfig(c Config) Config {
	c.CAFile = cr.CA.CertFile()
	c.CertFile, c.KeyFile = cr.Server.CertFile, cr.Server.KeyFile
	c.PeerCertFile, c.PeerKeyFile = cr.Peer.CertFile, cr.Peer.KeyFile
	return c
}
