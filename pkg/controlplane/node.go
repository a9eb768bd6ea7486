package controlplane

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/rayctl/rayctl/pkg/apiserver"
	"github.com/rayctl/rayctl/pkg/kubelet"
	"github.com/rayctl/rayctl/pkg/kubelet/node"
	"github.com/rayctl/rayctl/pkg/kubelet/podenv"
	podstatus "github.com/rayctl/rayctl/pkg/kubelet/status"
	"github.com/rayctl/rayctl/pkg/runtime"
	"github.com/rayctl/rayctl/pkg/runtime/fake"
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
	return node.Specs(cfg.NodeName, cfg.NodeCapacity, cfg.Nodes, cfg.NodeLabels, cfg.NodeTaints, cfg.SimulatedNodes)
}

// insufficientHint ends the FailedScheduling event of a pod that asks for more than the Nodes have: the
// flags that make them advertise more.
func insufficientHint(capacity map[string]string, moreNodes bool) string {
	if moreNodes {
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

// kubeletQPS and kubeletBurst limit each node's API client: the first node may run every pod of the
// cluster, where a real kubelet (50 requests a second by default) runs at most ~110; held to 100 a
// second, its status writes, tokens and reads bounded a 1,000-pod start to ~50 s by themselves. Its
// events keep a real kubelet's pace (kubelet.EventQPS).
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
	var real, simulated []node.Spec
	for i, sp := range specs {
		if sp.Simulated {
			simulated = append(simulated, sp)
			continue
		}
		real = append(real, sp)
		if over := node.Overcommits(node.HostCapacity("/"), sp.Capacity); len(over) > 0 {
			flag := "--node-capacity"
			if i > 0 {
				flag = "--node " + sp.Name
			}
			fmt.Fprintf(cp.out, "warning: %s advertises more than this machine has: %s; pods may overcommit it\n", flag, strings.Join(over, ", "))
		}
	}
	// Nodes an earlier start served that this one does not (a --node left out, --simulated-nodes fewer)
	// go, with their pods, before any kubelet re-adopts its containers.
	admin, err := kubernetes.NewForConfig(cp.server.LoopbackConfig)
	if err != nil {
		return "", err
	}
	all := make([]string, len(specs))
	for i, sp := range specs {
		all[i] = sp.Name
	}
	removed, err := node.RemoveStale(cp.compCtx, admin, all)
	for _, r := range removed {
		fmt.Fprintf(cp.out, "removed %s\n", r)
	}
	if err != nil {
		return "", err
	}
	kl, err := cp.startKubelet("kubelet", nodeCfg, real, cp.images, cp.dir.Join("pods"), &cert)
	if err != nil {
		return "", err
	}
	names := make([]string, len(real))
	for i, sp := range real {
		names[i] = sp.Name
	}
	summary := "node " + strings.Join(names, ", ") + ", API " + kl.APIAddr()
	if len(simulated) > 0 {
		// The simulated nodes' pods run on a fake runtime of their own (Running and Ready without a
		// process), under a kubelet of their own, so that neither kubelet's re-adoption of its runtime's
		// containers ever sees the other's.
		first, err := cp.identityConfig("kubelet-"+simulated[0].Name, "system:node:"+simulated[0].Name, []string{"system:nodes"})
		if err != nil {
			return "", err
		}
		sim, err := cp.startKubelet("kubelet-simulated", first, simulated, fake.New(fake.Options{}), cp.dir.Join(simulatedPodsDir), &cert)
		if err != nil {
			return "", err
		}
		summary += fmt.Sprintf("; %d simulated (%s…%s, no processes), API %s", len(simulated), simulated[0].Name, simulated[len(simulated)-1].Name, sim.APIAddr())
	}
	return summary, nil
}

// simulatedPodsDir is where the simulated nodes' pods keep their directories, apart from real pods'.
const simulatedPodsDir = "pods-simulated"

// startKubelet runs a kubelet, logged as name, for nodes (the first reached with firstCfg, each other
// with an identity of its own) on rt until Stop, and returns once its nodes are registered.
func (cp *ControlPlane) startKubelet(name string, firstCfg *rest.Config, nodes []node.Spec, rt runtime.Runtime, podsDir string, cert *tls.Certificate) (*kubelet.Kubelet, error) {
	var more []kubelet.NodeConfig
	for _, sp := range nodes[1:] {
		rc, err := cp.identityConfig("kubelet-"+sp.Name, "system:node:"+sp.Name, []string{"system:nodes"})
		if err != nil {
			return nil, err
		}
		rc.QPS, rc.Burst = kubeletQPS, kubeletBurst
		more = append(more, kubelet.NodeConfig{Name: sp.Name, RESTConfig: rc, Labels: sp.Labels, Taints: sp.Taints, Capacity: sp.Capacity})
	}
	firstCfg.QPS, firstCfg.Burst = kubeletQPS, kubeletBurst
	var onStatusWrite podstatus.WriteHook
	if cp.recorder != nil {
		onStatusWrite = podstatus.ChainHook(cp.recorder)
	}
	kl, err := kubelet.New(kubelet.Config{
		NodeName:          nodes[0].Name,
		Capacity:          nodes[0].Capacity,
		NodeLabels:        nodes[0].Labels,
		NodeTaints:        nodes[0].Taints,
		MoreNodes:         more,
		RESTConfig:        firstCfg,
		Runtime:           rt,
		PodsDir:           podsDir,
		ClusterDNS:        cp.clusterDNS,
		ClusterDomain:     "cluster.local",
		APIServer:         &podenv.APIServer{Host: cp.podAPI.host.String(), Port: cp.podAPI.port},
		KubernetesVersion: apiserver.KubernetesVersion(),
		NodeIP:            "127.0.0.1",
		OnStatusWrite:     onStatusWrite,
		Simulated:         nodes[0].Simulated,
		API: kubelet.APIConfig{
			Addr:         "127.0.0.1:0",
			ServingCert:  cert,
			ClientCAs:    cp.certs.ca.Pool(),
			AllowedUsers: []string{kubeletClientUser},
		},
	})
	if err != nil {
		return nil, err
	}
	cp.runLogged(name, kl.Run)
	select {
	case <-kl.Ready():
	case <-cp.compCtx.Done():
		return nil, cp.compCtx.Err()
	}
	return kl, nil
}
