// Package kubeconfig writes and merges the kubeconfig files through which kubectl and client-go reach
// rayctl's API server.
package kubeconfig

import (
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/rayctl/rayctl/pkg/apiserver/pki"
)

// ContextName is the name of rayctl's cluster, user and context in a kubeconfig.
const ContextName = "rayctl"

// Build returns a kubeconfig for server with the CA and a client certificate embedded.
func Build(server string, caPEM []byte, client *pki.KeyPair) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ContextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[ContextName] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	// No namespace: kubectl then uses "default", and rayctl's own commands their own default (demo: "demo").
	cfg.Contexts[ContextName] = &clientcmdapi.Context{Cluster: ContextName, AuthInfo: ContextName}
	cfg.CurrentContext = ContextName
	return cfg
}

// Write stores cfg at path, readable by its owner only.
func Write(path string, cfg *clientcmdapi.Config) error {
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return pki.WriteFileAtomic(path, b)
}

// Merge adds cfg's cluster, user and context to the kubeconfig at path (creating it), replacing entries of
// the same names and leaving the others and the current context alone.
func Merge(path string, cfg *clientcmdapi.Config) error {
	existing, err := clientcmd.LoadFromFile(path)
	if os.IsNotExist(err) {
		existing, err = clientcmdapi.NewConfig(), nil
	}
	if err != nil {
		return err
	}
	for k, v := range cfg.Clusters {
		existing.Clusters[k] = v
	}
	for k, v := range cfg.AuthInfos {
		existing.AuthInfos[k] = v
	}
	for k, v := range cfg.Contexts {
		existing.Contexts[k] = v
	}
	if existing.CurrentContext == "" {
		existing.CurrentContext = cfg.CurrentContext
	}
	return Write(path, existing)
}

// RESTConfig loads the kubeconfig at path as a client config.
func RESTConfig(path string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", path)
}
