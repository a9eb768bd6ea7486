// Package endpoints keeps the core/v1 Endpoints and discovery.k8s.io/v1 EndpointSlices of every Service
// with a selector in step with the Pods that selector matches, as kube-controller-manager's endpoints and
// endpointslice controllers do on a real cluster.
//
// For each such Service it writes:
//
//   - an Endpoints object of the Service's name: every selected Pod with an IPv4 pod IP and not terminating,
//     ready ones under addresses and the rest under notReadyAddresses (all under addresses, terminating ones
//     included, when spec.publishNotReadyAddresses is set); one subset per distinct set of resolved ports;
//   - EndpointSlices (addressType IPv4, at most 100 endpoints each, one group per distinct set of resolved
//     ports, an empty placeholder slice when no Pod qualifies) labelled kubernetes.io/service-name=<service>
//     and endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io and owned by the Service.
//     Terminating Pods stay in slices with conditions terminating=true, serving=<pod ready>, ready=false
//     (ready=true when publishNotReadyAddresses is set).
//
// A port's targetPort is either a number or the name of a container port, looked up per Pod (with the
// Service port's protocol), so Pods of one Service may listen on different numbers. A Pod that does not
// declare a named targetPort is left out for that port. Each address carries the Pod as targetRef, its node
// name, and its hostname when the Pod's spec.subdomain names the Service.
//
// Services without a selector, and ExternalName services, are left alone: their Endpoints and slices belong to
// whoever writes them. Objects are only written when their content changes. When a Service goes away its
// Endpoints and the slices this controller manages go with it.
package endpoints
