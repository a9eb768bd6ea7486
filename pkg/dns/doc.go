// Package dns is rayctl's cluster DNS server: it answers the names of the Kubernetes DNS specification
// (https://github.com/kubernetes/dns/blob/master/docs/specification.md) for the cluster zone from the API
// server's Services, EndpointSlices and Pods, and forwards every other name to the host's resolvers.
//
// Names in the zone (cluster.local by default), all with a TTL of 5 seconds:
//
//	<svc>.<ns>.svc.<zone>                  A     the ClusterIP, or the ready endpoint IPs (see below)
//	<svc>.<ns>.svc.<zone>                  CNAME spec.externalName, for ExternalName Services
//	<ep>.<svc>.<ns>.svc.<zone>             A     one ready endpoint: <ep> is its hostname (a Pod whose
//	                                             spec.hostname is set and spec.subdomain names the Service),
//	                                             else its IP with dashes (10-244-0-5)
//	_<port>._<proto>.<svc>.<ns>.svc.<zone> SRV   one record per ready endpoint of a named port, target <ep>
//	                                             above and the endpoint's own (target) port
//	<a-b-c-d>.<ns>.pod.<zone>              A     a.b.c.d, when a Pod in <ns> has that IP
//	dns-version.<zone>                     TXT   the specification version, 1.1.0
//	<d.c.b.a>.in-addr.arpa                 PTR   <ep>.<svc>.<ns>.svc.<zone> for ready endpoint IPs
//
// An endpoint is ready when its EndpointSlice condition says so (or says nothing); with the Service's
// spec.publishNotReadyAddresses every endpoint counts. A name that exists without records of the asked type
// answers NOERROR with no records; a name in the zone that does not exist answers NXDOMAIN.
//
// With Options.ClusterIPs (set where rayctl's Service proxy, pkg/serviceproxy, makes ClusterIPs carry
// traffic) a Service with a ClusterIP is answered as on a cluster: <svc>.<ns>.svc.<zone> is the ClusterIP, its
// SRV records name the Service and the Service's port, and it has no endpoint names. Headless Services, and
// every Service without the option (where ClusterIPs carry nothing), are answered by their endpoints: the ready
// endpoint (Pod) IPs, SRV records with the endpoints' target ports, and the endpoint names above. A client that
// connects to <svc>:<port> then reaches a Pod directly on <port>, which works when the Service's port and
// targetPort are equal (as in KubeRay's head Service), and not otherwise.
//
// Search paths (<svc>, <svc>.<ns>) are the client's business: the kubelet writes them into each Pod's
// resolv.conf. Names outside the zone, and reverse lookups of unknown addresses, go to the upstream resolvers
// in turn, each with a timeout, over the transport the question came on; SERVFAIL when none answers.
package dns
