package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rayctl/rayctl/pkg/datadir"
)

// clusterFlags are kubectl's ways of naming the cluster and namespace, for rayctl's own commands
// (trace, diagnose, demo): --kubeconfig, else $KUBECONFIG, else the data dir's kubeconfig; --context;
// -n, else the context's namespace, else the command's default.
type clusterFlags struct {
	kubeconfig, context, namespace string
	defaultNamespace               string
}

// addClusterFlags adds --kubeconfig, --context and -n/--namespace to cmd.
func addClusterFlags(cmd *cobra.Command, defaultNamespace string) *clusterFlags {
	f := &clusterFlags{defaultNamespace: defaultNamespace}
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "the kubeconfig file to use (default $KUBECONFIG, else the data dir's)")
	cmd.Flags().StringVar(&f.context, "context", "", "the kubeconfig context to use (default its current context)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "the namespace (default the context's, else "+defaultNamespace+")")
	return f
}

// ownKubeconfig reports whether the commands use the data dir's kubeconfig: neither --kubeconfig nor
// $KUBECONFIG names another, as with `rayctl kubectl`.
func (f *clusterFlags) ownKubeconfig() bool {
	return f.kubeconfig == "" && os.Getenv("KUBECONFIG") == ""
}

// clientConfig is the kubeconfig as kubectl would read it with these flags.
func (f *clusterFlags) clientConfig(dir *datadir.Dir) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG's files, merged
	switch {
	case f.kubeconfig != "":
		rules.ExplicitPath = f.kubeconfig
	case f.ownKubeconfig():
		rules.ExplicitPath = dir.Kubeconfig()
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	overrides.Context.Namespace = f.namespace
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// connect returns the REST config and the namespace the flags name. With the data dir's kubeconfig it
// first checks that rayctl runs there, saying how to start it.
func (f *clusterFlags) connect(dir *datadir.Dir) (*rest.Config, string, error) {
	if f.ownKubeconfig() {
		if _, err := dir.ReadState(); err != nil {
			return nil, "", fmt.Errorf("rayctl is not running on %s (start it with `rayctl up`, or name a cluster with --kubeconfig): %w", dir.Path, err)
		}
	}
	cc := f.clientConfig(dir)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns, err := f.resolveNamespace(cc)
	return cfg, ns, err
}

// resolveNamespace is -n, else the context's namespace, else the command's default (kubectl's order;
// clientcmd alone would fall back on "default").
func (f *clusterFlags) resolveNamespace(cc clientcmd.ClientConfig) (string, error) {
	if f.namespace != "" {
		return f.namespace, nil
	}
	raw, err := cc.RawConfig()
	if err != nil {
		return "", err
	}
	name := f.context
	if name == "" {
		name = raw.CurrentContext
	}
	if c, ok := raw.Contexts[name]; ok && c.Namespace != "" {
		return c.Namespace, nil
	}
	return f.defaultNamespace, nil
}
