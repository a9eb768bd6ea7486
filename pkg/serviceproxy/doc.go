// Package serviceproxy makes Services' ClusterIPs carry traffic in rayctl's node network namespace, the job
// kube-proxy does on a cluster's nodes. It watches Services and EndpointSlices through the API server and
// keeps one nftables table there, rayctl-services, in which a connection to a ClusterIP and port (TCP, UDP,
// SCTP) is translated to one of the Service's ready endpoints, at the port the EndpointSlices give (a
// targetPort by name is already resolved there by the endpoints controller):
//
//   - from pods (the prerouting hook) and from the node namespace itself (output), where rayctl dials;
//   - an endpoint is chosen at random among the ready ones, or, with sessionAffinity ClientIP, the one
//     the client's address was last sent to within timeoutSeconds;
//   - a pod that reaches itself through its Service (hairpin) gets the gateway as the source, so its reply
//     comes back through the translation;
//   - a ClusterIP with no ready endpoint for the port, or a port the Service does not have, refuses at once
//     (a TCP reset, an ICMP error otherwise).
//
// Headless Services (clusterIP None) and ExternalName Services are left alone; NodePort and LoadBalancer
// Services get their ClusterIP part only. Changes are coalesced: the table is rewritten whole, in one
// transaction, at most every MinSyncInterval.
//
// When an endpoint leaves a UDP port, conntrack forgets the flows translated to it.
//
// The translation itself is Linux-only (nftables); elsewhere New fails and pods share the host's network.
package serviceproxy
