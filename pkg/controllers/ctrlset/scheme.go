package ctrlset

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RequireKinds fails, naming the controller and the first missing kind, unless scheme knows every kind
// of gv a controller is about to watch (a manager built with too small a scheme would only fail later,
// on its first watch).
func RequireKinds(scheme *runtime.Scheme, controller string, gv schema.GroupVersion, kinds ...string) error {
	for _, kind := range kinds {
		if !scheme.Recognizes(gv.WithKind(kind)) {
			return fmt.Errorf("%s controller: the manager's scheme lacks %s %s", controller, gv, kind)
		}
	}
	return nil
}
