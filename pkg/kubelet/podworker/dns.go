package podworker

import (
	"bufio"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rayctl/rayctl/pkg/runtime"
)

// HostDNS reads a resolv.conf (the host's) into a DNS config; a missing file gives an empty one.
func HostDNS(path string) runtime.DNSConfig {
	var cfg runtime.DNSConfig
	f, err := os.Open(path)
	if err != nil {
		return cfg
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			cfg.Nameservers = append(cfg.Nameservers, fields[1])
		case "search", "domain":
			cfg.Searches = fields[1:]
		case "options":
			cfg.Options = append(cfg.Options, fields[1:]...)
		}
	}
	return cfg
}

// PodDNS returns the resolv.conf a pod gets under its dnsPolicy: ClusterFirst (the cluster's
// nameservers, searches <ns>.svc.<domain> svc.<domain> <domain> then the host's, ndots:5; host-network
// pods and clusters without DNS fall back to Default), ClusterFirstWithHostNet, Default (the host's),
// or None; spec.dnsConfig is merged on top.
func PodDNS(pod *corev1.Pod, clusterDNS []string, clusterDomain string, host runtime.DNSConfig) runtime.DNSConfig {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if (policy == corev1.DNSClusterFirst || policy == corev1.DNSClusterFirstWithHostNet) && len(clusterDNS) == 0 {
		policy = corev1.DNSDefault
	}
	var cfg runtime.DNSConfig
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		cfg.Nameservers = slices.Clone(clusterDNS)
		if clusterDomain == "" {
			clusterDomain = "cluster.local"
		}
		cfg.Searches = []string{pod.Namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
		cfg.Searches = appendNew(cfg.Searches, host.Searches...)
		cfg.Options = []string{"ndots:5"}
	case corev1.DNSDefault:
		cfg = runtime.DNSConfig{
			Nameservers: slices.Clone(host.Nameservers),
			Searches:    slices.Clone(host.Searches),
			Options:     slices.Clone(host.Options),
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Nameservers = appendNew(cfg.Nameservers, dc.Nameservers...)
		cfg.Searches = appendNew(cfg.Searches, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			cfg.Options = slices.DeleteFunc(cfg.Options, func(s string) bool {
				name, _, _ := strings.Cut(s, ":")
				return name == o.Name
			})
			cfg.Options = append(cfg.Options, opt)
		}
	}
	return cfg
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}
