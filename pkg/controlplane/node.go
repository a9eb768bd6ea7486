package controlplane

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/kubelet"
	"github.com/rayctl/rayctl/pkg/kubelet/node"
	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
	podstatus "github.com/rayctl/rayctl/pkg/kubelet/status"
)

// DefaultNodeName is the host's name made into a valid node name.
func DefaultNodeName() string {
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

// nodeSpecs are the nodes cfg asks for, the first this machine's as --node-name and --node-capacity
// give it.
func (cfg Config) nodeSpecs() ([]node.Spec, error) {
	return node.Specs(cfg.NodeName, cfg.NodeCapacity, cfg.Nodes, cfg.NodeLabels, cfg.NodeTaints)
}

// insufficientHint ends the FailedScheduling event of a pod that asks for more than the Nodes have: the
// flags that make them advertise more.
func insufficientHint(capacity map[string]string, moreNodes int) string {
	if moreNodes > 0 {
		return "(rayctl up --node-capacity and --node NAME:cpu=4,memory=16Gi,nvidia.com/gpu=1 set what each node advertises)"
	}
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

// kubeletQPS and kubeletBurst limit the kubelet's API client (see startNode).
const (
	kubeletQPS   = 1000
	kubeletBurst = 2000
)

// startNode is the "kubelet" step: this machine's kubelet (identity system:node:<name>), run until
// Stop; it returns once the node is registered. With Config.Kubelet off there is none.
func (cp *ControlPlane) startNode() (string, error) {
	cfg := cp.cfg
	if !cfg.Kubelet {
		return "off (--kubelet=false): pods stay unscheduled", nil
	}
	nodeCfg, err := cp.identityConfig("kubelet", "system:node:"+cfg.NodeName, []string{"system:nodes"})
	if err != nil {
		return "", err
	}
	// This one node runs every pod of the cluster, where a real kubelet (50 requests a second by default)
	// runs at most ~110: held to 100 a second, its status writes, tokens and reads bounded a 1,000-pod
	// start to ~50 s by themselves. Its events keep a real kubelet's pace (kubelet.EventQPS).
	nodeCfg.QPS, nodeCfg.Burst = kubeletQPS, kubeletBurst

	serving, err := cp.certs.ca.Serving("kubelet", []string{"localhost", cfg.NodeName}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return "", err
	}
	cert, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		return "", err
	}
	specs, err := cfg.nodeSpecs()
	if err != nil {
		return "", err
	}
	for _, sp := range specs {
		if over := node.Overcommits(node.HostCapacity("/"), sp.Capacity); len(over) > 0 {
			fmt.Fprintf(cp.out, "warning: node %s advertises more than this machine has: %s; pods may overcommit it\n", sp.Name, strings.Join(over, ", "))
		}
	}
	var more []kubelet.NodeConfig
	for _, sp := range specs[1:] {
		rc, err := cp.identityConfig("kubelet-"+sp.Name, "system:node:"+sp.Name, []string{"system:nodes"})
		if err != nil {
			return "", err
		}
		rc.QPS, rc.Burst = kubeletQPS, kubeletBurst
		more = append(more, kubelet.NodeConfig{Name: sp.Name, RESTConfig: rc, Labels: sp.Labels, Taints: sp.Taints, Capacity: sp.Capacity})
	}
	var onStatusWrite podstatus.WriteHook
	if cp.recorder != nil {
		onStatusWrite = podstatus.ChainHook(cp.recorder)
	}
	kl, err := kubelet.New(kubelet.Config{
		NodeName:          cfg.NodeName,
		Capacity:          specs[0].Capacity,
		NodeLabels:        specs[0].Labels,
		NodeTaints:        specs[0].Taints,
		MoreNodes:         more,
		RESTConfig:        nodeCfg,
		Runtime:           cp.images,
		PodsDir:           cp.dir.Join("pods"),
		ClusterDNS:        cp.clusterDNS,
		ClusterDomain:     "cluster.local",
		APIServer:         &podenv.APIServer{Host: cp.podAPI.host.String(), Port: cp.podAPI.port},
		KubernetesVersion: apiserver.KubernetesVersion(),
		NodeIP:            "127.0.0.1",
		OnStatusWrite:     onStatusWrite,
		API: kubelet.APIConfig{
			Addr:         "127.0.0.1:0",
			ServingCert:  &cert,
			ClientCAs:    cp.certs.ca.Pool(),
			AllowedUsers: []string{kubeletClientUser},
		},
	})
	if err != nil {
		return "", err
	}
	cp.runLogged("kubelet", kl.Run)
	select {
	case <-kl.Ready():
	case <-cp.compCtx.Done():
		return "", cp.compCtx.Err()
	}
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	return "node " + strings.Join(names, ", ") + ", API " + kl.APIAddr(), nil
}
