package controlplane

import (
	"time"

	"go.uber.org/zap"

	"github.com/rayctl/rayctl/pkg/netpolicy"
)

// startNetworkPolicy is the "netpolicy" step: the NetworkPolicy enforcer (identity rayctl:network-policy)
// keeps the nftables table rayctl-policy in the node namespace in step with the API's NetworkPolicies,
// Pods and Namespaces. Where pods share the host's network there is no forwarding path to filter: policies
// are stored and not enforced (the no-data-plane controller says so on each).
func (cp *ControlPlane) startNetworkPolicy() (string, error) {
	rt := cp.rt
	if rt.Network == nil || rt.Network.Gateway() == nil {
		return "off: pods share the host's network, NetworkPolicies are not enforced", nil
	}
	if !rt.Network.BridgeFiltered() {
		return "off: the kernel's br_netfilter module is not loaded, so traffic between pods on the bridge cannot be filtered; " +
			"NetworkPolicies are not enforced (load it as root: modprobe br_netfilter, then restart rayctl)", nil
	}
	cfg, err := cp.identityConfig("network-policy", "rayctl:network-policy", nil)
	if err != nil {
		return "", err
	}
	logger := cp.logger.Named("netpolicy")
	e, err := netpolicy.New(netpolicy.Options{RESTConfig: cfg, NetNS: rt.Network.NodeNSPath(),
		Written: func(r *netpolicy.Ruleset, took time.Duration, err error) {
			if err != nil {
				logger.Error("writing the NetworkPolicy table", zap.Error(err))
				return
			}
			logger.Debug("NetworkPolicy table written", zap.String("rules", netpolicy.Describe(r)), zap.Duration("took", took))
		}})
	if err != nil {
		return "", err
	}
	cp.runLogged("netpolicy", e.Run)
	cp.policyEnforced = true
	return "enforced in the pod network (nftables table " + netpolicy.TableName + ")", nil
}
