package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
	"github.com/rayctl/rayctl/pkg/datadir"
	"github.com/rayctl/rayctl/pkg/kubelet"
	"github.com/rayctl/rayctl/pkg/kubelet/node"
	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
	podstatus "github.com/rayctl/rayctl/pkg/kubelet/status"
	"github.com/rayctl/rayctl/pkg/runtime"
)

// kubeletClientUser is the identity the API server uses towards kubelets (logs, exec).
const kubeletClientUser = "kube-apiserver-kubelet-client"

// defaultNodeName is the host's name made into a valid node name.
func defaultNodeName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "rayctl-node"
	}
	name := strings.Trim(regexp.MustCompile(`[^a-z0-9.-]+`).ReplaceAllString(strings.ToLower(host), "-"), "-.")
	if name == "" {
		return "rayctl-node"
	}
	return name
}

// insufficientHint ends the FailedScheduling event of a pod that asks for more than the Node has: the
// flag that makes the Node advertise more.
func insufficientHint(capacity map[string]string) string {
	if len(capacity) == 0 {
		return "(the node advertises what this machine has; rayctl up --node-capacity cpu=8,memory=16Gi advertises more, overcommitting it)"
	}
	var given []string
	for k, v := range capacity {
		given = append(given, k+"="+v)
	}
	sort.Strings(given)
	return "(the node advertises " + strings.Join(given, ",") + " from rayctl up --node-capacity; raise it to fit)"
}

// startNode starts this machine's kubelet (identity system:node:<name>) and the binder that places pods
// on it (identity system:kube-scheduler). It returns once the node is registered.
func startNode(ctx context.Context, run func(func()), ca *pki.Authority, serverURL string, dir *datadir.Dir, o *upOptions,
	rt runtime.Runtime, clusterDNS []string, podAPI podAPIAddress, out io.Writer, logger *zap.Logger) (*kubelet.Kubelet, error) {
	nodeCfg, err := identityConfig(ca, serverURL, "kubelet", "system:node:"+o.nodeName, []string{"system:nodes"})
	if err != nil {
		return nil, err
	}
	serving, err := ca.Serving("kubelet", []string{"localhost", o.nodeName}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		return nil, err
	}
	capacity, err := node.ParseCapacity(o.nodeCapacity)
	if err != nil {
		return nil, fmt.Errorf("--node-capacity %w", err)
	}
	if over := node.Overcommits(node.HostCapacity("/"), capacity); len(over) > 0 {
		fmt.Fprintf(out, "warning: --node-capacity advertises more than this machine has: %s; pods may overcommit it\n", strings.Join(over, ", "))
	}
	var onStatusWrite podstatus.WriteHook
	if o.recorder != nil {
		onStatusWrite = podstatus.ChainHook(o.recorder)
	}
	kl, err := kubelet.New(kubelet.Config{
		NodeName:          o.nodeName,
		Capacity:          capacity,
		RESTConfig:        nodeCfg,
		Runtime:           rt,
		PodsDir:           dir.Join("pods"),
		ClusterDNS:        clusterDNS,
		ClusterDomain:     "cluster.local",
		APIServer:         &podenv.APIServer{Host: podAPI.host.String(), Port: podAPI.port},
		KubernetesVersion: apiserver.KubernetesVersion(),
		NodeIP:            "127.0.0.1",
		OnStatusWrite:     onStatusWrite,
		API: kubelet.APIConfig{
			Addr:         "127.0.0.1:0",
			ServingCert:  &cert,
			ClientCAs:    ca.Pool(),
			AllowedUsers: []string{kubeletClientUser},
		},
	})
	if err != nil {
		return nil, err
	}
	run(func() {
		if err := kl.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error("kubelet stopped", zap.Error(err))
		}
	})
	select {
	case <-kl.Ready():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return kl, nil
}
