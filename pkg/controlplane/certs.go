package controlplane

import (
	"crypto/ecdsa"
	"fmt"
	"net"

	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/apiserver/etcd"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/runtime/network"
)

// kubeletClientUser is the identity the API server uses towards kubelets (logs, exec).
const kubeletClientUser = "kube-apiserver-kubelet-client"

// certificates are the data dir's CA and what the API server, etcd and the admin kubeconfig are
// issued from it at every start; each component's client identity is issued as it starts
// (identityConfig).
type certificates struct {
	ca                                      *pki.Authority
	serving, loopback, admin, kubeletClient *pki.KeyPair
	etcd                                    *etcd.Credentials
	saKey                                   *ecdsa.PrivateKey
}

// issueCertificates is the "pki" step: the CA (made on the first start), then the API server's
// serving certificate, the service-account signing key, etcd's credentials and the client
// certificates of the API server itself, the admin and the API server towards kubelets.
func (cp *ControlPlane) issueCertificates() (string, error) {
	c := &certificates{}
	var err error
	if c.ca, err = pki.LoadOrCreate(cp.dir.Join("pki")); err != nil {
		return "", damaged(cp.dir, err)
	}
	hosts, ips, err := apiServerSANs(cp.cfg.PodCIDR)
	if err != nil {
		return "", err
	}
	if c.serving, err = c.ca.Serving("apiserver", hosts, ips); err != nil {
		return "", err
	}
	if c.saKey, err = c.ca.SigningKey("sa"); err != nil {
		return "", damaged(cp.dir, err)
	}
	if c.etcd, err = etcd.IssueCredentials(cp.dir.Join("pki", "etcd"), cp.dir.Join("pki")); err != nil {
		return "", damaged(cp.dir, err)
	}
	if c.loopback, err = c.ca.Client("apiserver-loopback", "system:apiserver", []string{"system:masters"}); err != nil {
		return "", err
	}
	if c.admin, err = c.ca.Client("admin", "rayctl-admin", []string{"system:masters"}); err != nil {
		return "", err
	}
	if c.kubeletClient, err = c.ca.Client("apiserver-kubelet-client", kubeletClientUser, nil); err != nil {
		return "", err
	}
	cp.certs = c
	return cp.dir.Join("pki"), nil
}

// apiServerSANs are the names and addresses the API server's serving certificate holds: loopback, where
// rayctl's components and kubectl reach it; the pod bridge's gateway (known from --pod-cidr before the
// bridge exists) and the kubernetes Service's ClusterIP and names, where in-cluster clients reach it.
func apiServerSANs(podCIDR string) ([]string, []net.IP, error) {
	gw, err := network.GatewayOf(podCIDR)
	if err != nil {
		return nil, nil, fmt.Errorf("--pod-cidr: %w", err)
	}
	hosts := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + network.ClusterDomain}
	return hosts, []net.IP{net.IPv4(127, 0, 0, 1), gw, apiserver.KubernetesServiceIP(nil)}, nil
}

// identityConfig is a client config for one component, authenticated by its own client certificate
// (certName in the data dir's pki, for user in groups), issued here. Responses come uncompressed, as
// kube-apiserver's own loopback client asks: over loopback gzip costs both ends CPU and saves nothing
// (it was ~5% of rayctl's CPU in the 1,000-pod scale run, mostly the watches' per-event flushes).
func (cp *ControlPlane) identityConfig(certName, user string, groups []string) (*rest.Config, error) {
	kp, err := cp.certs.ca.Client(certName, user, groups)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:                      cp.serverURL(),
		TLSClientConfig:           rest.TLSClientConfig{CAData: cp.certs.ca.CertPEM(), CertData: kp.CertPEM, KeyData: kp.KeyPEM},
		QPS:                       100,
		Burst:                     200,
		DisableCompression:        true,
		WarningHandlerWithContext: apiserver.InternalClientWarnings,
	}, nil
}

// serverURL is the API server's loopback URL, where components reach it.
func (cp *ControlPlane) serverURL() string { return "https://" + cp.server.Addr }
