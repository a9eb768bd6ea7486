package apiserver

import (
	"runtime/debug"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"
)

// KubernetesVersion is the Kubernetes release whose API rayctl serves, read from the k8s.io/apiserver
// module it is built with (v0.37.2 serves Kubernetes v1.37.2), unless the build stamped one in.
func KubernetesVersion() string {
	if v := baseversion.Get().GitVersion; v != "" && !strings.HasPrefix(v, "v0.0.0") {
		return v
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/apiserver" && strings.HasPrefix(dep.Version, "v0.") {
				return "v1." + strings.TrimPrefix(dep.Version, "v0.")
			}
		}
	}
	return "v1.37.2"
}

// stampedVersion reports KubernetesVersion from /version even when the binary was built without ldflags.
type stampedVersion struct {
	basecompatibility.EffectiveVersion
}

func (v stampedVersion) Info() *apimachineryversion.Info {
	info := v.EffectiveVersion.Info()
	if info != nil && strings.HasPrefix(info.GitVersion, "v0.0.0") {
		info.GitVersion = KubernetesVersion()
	}
	return info
}

func newEffectiveVersion() basecompatibility.EffectiveVersion {
	v := strings.TrimPrefix(KubernetesVersion(), "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	return stampedVersion{basecompatibility.NewEffectiveVersionFromString(v, "", "")}
}
