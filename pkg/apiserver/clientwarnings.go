package apiserver

import (
	"context"
	"strings"

	"k8s.io/client-go/rest"
)

// InternalClientWarnings handles the warnings the API server sends rayctl's own clients: its loopback
// client and every component's. Each is logged through klog, as client-go's default handler logs it,
// except the deprecation of v1 Endpoints. rayctl maintains Endpoints on purpose, as kube-apiserver and
// kube-controller-manager do: the kubernetes Service's, checked every 10 s; the endpoints controller's;
// the watches of the garbage collector and the controllers' caches. That warning, sent on each of those
// requests, speaks to the API's users, who still get it; in rayctl's log it was a line every 10 s.
var InternalClientWarnings rest.WarningHandlerWithContext = internalWarnings{}

// endpointsDeprecated opens the API server's warning on every v1 Endpoints request (KEP-4974).
const endpointsDeprecated = "v1 Endpoints is deprecated"

type internalWarnings struct{}

// HandleWarningHeaderWithContext drops the Endpoints deprecation and logs the rest.
func (internalWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if strings.HasPrefix(text, endpointsDeprecated) {
		return
	}
	rest.WarningLogger{}.HandleWarningHeaderWithContext(ctx, code, agent, text)
}
