package validation

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedPortProtocols  = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	supportedRestartPolices = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	supportedDNSPolicies    = []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
	supportedPullPolicies   = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	supportedTermMsgPolicy  = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	supportedURISchemes     = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}
	supportedTaintEffects   = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	supportedHostPathTypes  = []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
		corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev}
	supportedEnvFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
		"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}
	supportedVolumeFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations"}
	supportedResourceFields   = []string{"limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage"}

	subscriptedFieldPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['(.*)'\]$`)
)

// ValidatePod checks a Pod on create: metadata (namespaced, name a DNS-1123
// subdomain) and the pod spec at "spec".
func ValidatePod(pod *corev1.Pod) field.ErrorList {
	allErrs := namespacedMeta(&pod.ObjectMeta, NameIsDNSSubdomain)
	return append(allErrs, ValidatePodSpec(&pod.Spec, field.NewPath("spec"))...)
}

// ValidatePodTemplateSpec checks the labels and annotations of a pod template
// and its spec, reporting under fldPath (e.g. "spec.template").
func ValidatePodTemplateSpec(t *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	metaPath := fldPath.Child("metadata")
	allErrs := metav1validation.ValidateLabels(t.Labels, metaPath.Child("labels"))
	allErrs = append(allErrs, apivalidation.ValidateAnnotations(t.Annotations, metaPath.Child("annotations"))...)
	return append(allErrs, ValidatePodSpec(&t.Spec, fldPath.Child("spec"))...)
}

// ValidatePodSpec checks a pod spec, reporting under fldPath (e.g. "spec").
func ValidatePodSpec(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	volumes, allErrs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))

	names := sets.New[string]()
	for i := range spec.InitContainers {
		allErrs = append(allErrs, validateContainer(&spec.InitContainers[i], spec, volumes, names, true, fldPath.Child("initContainers").Index(i))...)
	}
	if len(spec.Containers) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("containers"), ""))
	}
	for i := range spec.Containers {
		allErrs = append(allErrs, validateContainer(&spec.Containers[i], spec, volumes, names, false, fldPath.Child("containers").Index(i))...)
	}

	allErrs = append(allErrs, oneOf(spec.RestartPolicy, fldPath.Child("restartPolicy"), supportedRestartPolices...)...)
	allErrs = append(allErrs, validateDNS(spec, fldPath)...)
	if spec.TerminationGracePeriodSeconds != nil {
		allErrs = append(allErrs, nonNegative(*spec.TerminationGracePeriodSeconds, fldPath.Child("terminationGracePeriodSeconds"))...)
	}
	if spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, validateActiveDeadline(*spec.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	if spec.Hostname != "" {
		allErrs = append(allErrs, dnsLabel(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		allErrs = append(allErrs, dnsLabel(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	allErrs = append(allErrs, metav1validation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	if spec.ServiceAccountName != "" {
		allErrs = append(allErrs, dnsSubdomain(spec.ServiceAccountName, fldPath.Child("serviceAccountName"))...)
	}
	if spec.NodeName != "" {
		allErrs = append(allErrs, dnsSubdomain(spec.NodeName, fldPath.Child("nodeName"))...)
	}
	if spec.SchedulerName != "" {
		allErrs = append(allErrs, dnsSubdomain(spec.SchedulerName, fldPath.Child("schedulerName"))...)
	}
	for i, s := range spec.ImagePullSecrets {
		if s.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	for i, g := range spec.ReadinessGates {
		allErrs = append(allErrs, qualifiedName(string(g.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	allErrs = append(allErrs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	if spec.SecurityContext != nil {
		allErrs = append(allErrs, validatePodSecurityContext(spec.SecurityContext, fldPath.Child("securityContext"))...)
	}
	return allErrs
}

func validateActiveDeadline(v int64, p *field.Path) field.ErrorList {
	if v < 1 || v > math.MaxInt32 {
		return field.ErrorList{field.Invalid(p, v, validation.InclusiveRangeError(1, math.MaxInt32))}
	}
	return nil
}

func validateDNS(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	allErrs := oneOf(spec.DNSPolicy, fldPath.Child("dnsPolicy"), supportedDNSPolicies...)
	cfgPath := fldPath.Child("dnsConfig")
	if spec.DNSPolicy == corev1.DNSNone {
		if spec.DNSConfig == nil {
			return append(allErrs, field.Required(cfgPath, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone)))
		}
		if len(spec.DNSConfig.Nameservers) == 0 {
			allErrs = append(allErrs, field.Required(cfgPath.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone)))
		}
	}
	if spec.DNSConfig != nil {
		if len(spec.DNSConfig.Nameservers) > 3 {
			allErrs = append(allErrs, field.Invalid(cfgPath.Child("nameservers"), spec.DNSConfig.Nameservers, "must not have more than 3 nameservers"))
		}
		for i, ns := range spec.DNSConfig.Nameservers {
			allErrs = append(allErrs, validIP(ns, cfgPath.Child("nameservers").Index(i))...)
		}
		for i, s := range spec.DNSConfig.Searches {
			allErrs = append(allErrs, dnsSubdomain(strings.TrimSuffix(s, "."), cfgPath.Child("searches").Index(i))...)
		}
		for i, o := range spec.DNSConfig.Options {
			if o.Name == "" {
				allErrs = append(allErrs, field.Required(cfgPath.Child("options").Index(i).Child("name"), "must not be empty"))
			}
		}
	}
	return allErrs
}

func validatePodSecurityContext(sc *corev1.PodSecurityContext, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if sc.RunAsUser != nil {
		allErrs = append(allErrs, validID(*sc.RunAsUser, p.Child("runAsUser"))...)
	}
	if sc.RunAsGroup != nil {
		allErrs = append(allErrs, validID(*sc.RunAsGroup, p.Child("runAsGroup"))...)
	}
	if sc.FSGroup != nil {
		allErrs = append(allErrs, validID(*sc.FSGroup, p.Child("fsGroup"))...)
	}
	for i, g := range sc.SupplementalGroups {
		allErrs = append(allErrs, validID(g, p.Child("supplementalGroups").Index(i))...)
	}
	return allErrs
}

func validID(id int64, p *field.Path) field.ErrorList {
	return invalid(p, id, validation.IsValidUserID(id))
}

func validateTolerations(tols []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, t := range tols {
		p := fldPath.Index(i)
		if t.Key != "" {
			allErrs = append(allErrs, qualifiedName(t.Key, p.Child("key"))...)
		} else if t.Operator != corev1.TolerationOpExists {
			allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			allErrs = append(allErrs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			allErrs = append(allErrs, labelValue(t.Value, p.Child("value"))...)
		case corev1.TolerationOpExists:
			if t.Value != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("value"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		allErrs = append(allErrs, optionalOneOf(t.Effect, p.Child("effect"), supportedTaintEffects...)...)
	}
	return allErrs
}

// validateVolumes checks the pod's volumes and returns them by name.
func validateVolumes(vols []corev1.Volume, fldPath *field.Path) (map[string]*corev1.Volume, field.ErrorList) {
	var allErrs field.ErrorList
	byName := map[string]*corev1.Volume{}
	for i := range vols {
		v := &vols[i]
		p := fldPath.Index(i)
		namePath := p.Child("name")
		switch {
		case v.Name == "":
			allErrs = append(allErrs, field.Required(namePath, ""))
		case byName[v.Name] != nil:
			allErrs = append(allErrs, field.Duplicate(namePath, v.Name))
		default:
			allErrs = append(allErrs, dnsLabel(v.Name, namePath)...)
		}
		if v.Name != "" && byName[v.Name] == nil {
			byName[v.Name] = v
		}
		allErrs = append(allErrs, validateVolumeSource(&v.VolumeSource, p)...)
	}
	return byName, allErrs
}

func validateVolumeSource(src *corev1.VolumeSource, p *field.Path) field.ErrorList {
	set := setMembers(src)
	if len(set) == 0 {
		return field.ErrorList{field.Required(p, "must specify a volume type")}
	}
	var allErrs field.ErrorList
	for _, extra := range set[1:] {
		allErrs = append(allErrs, field.Forbidden(p.Child(extra), "may not specify more than 1 volume type"))
	}
	switch {
	case src.EmptyDir != nil:
		ed, ep := src.EmptyDir, p.Child("emptyDir")
		switch {
		case ed.Medium == corev1.StorageMediumDefault, ed.Medium == corev1.StorageMediumMemory,
			ed.Medium == corev1.StorageMediumHugePages, strings.HasPrefix(string(ed.Medium), string(corev1.StorageMediumHugePagesPrefix)):
		default:
			allErrs = append(allErrs, field.NotSupported(ep.Child("medium"), ed.Medium,
				[]corev1.StorageMedium{corev1.StorageMediumDefault, corev1.StorageMediumMemory, corev1.StorageMediumHugePages}))
		}
		if ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
			allErrs = append(allErrs, field.Invalid(ep.Child("sizeLimit"), ed.SizeLimit.String(), apivalidation.IsNegativeErrorMsg))
		}
	case src.HostPath != nil:
		hp := p.Child("hostPath")
		if src.HostPath.Path == "" {
			allErrs = append(allErrs, field.Required(hp.Child("path"), ""))
		}
		if src.HostPath.Type != nil {
			allErrs = append(allErrs, optionalOneOf(*src.HostPath.Type, hp.Child("type"), supportedHostPathTypes...)...)
		}
	case src.ConfigMap != nil:
		cp := p.Child("configMap")
		if src.ConfigMap.Name == "" {
			allErrs = append(allErrs, field.Required(cp.Child("name"), ""))
		}
		allErrs = append(allErrs, validateMode(src.ConfigMap.DefaultMode, cp.Child("defaultMode"))...)
		allErrs = append(allErrs, validateKeyToPaths(src.ConfigMap.Items, cp.Child("items"))...)
	case src.Secret != nil:
		sp := p.Child("secret")
		if src.Secret.SecretName == "" {
			allErrs = append(allErrs, field.Required(sp.Child("secretName"), ""))
		}
		allErrs = append(allErrs, validateMode(src.Secret.DefaultMode, sp.Child("defaultMode"))...)
		allErrs = append(allErrs, validateKeyToPaths(src.Secret.Items, sp.Child("items"))...)
	case src.DownwardAPI != nil:
		dp := p.Child("downwardAPI")
		allErrs = append(allErrs, validateMode(src.DownwardAPI.DefaultMode, dp.Child("defaultMode"))...)
		allErrs = append(allErrs, validateDownwardAPIFiles(src.DownwardAPI.Items, dp.Child("items"))...)
	case src.Projected != nil:
		pp := p.Child("projected")
		allErrs = append(allErrs, validateMode(src.Projected.DefaultMode, pp.Child("defaultMode"))...)
		for i := range src.Projected.Sources {
			allErrs = append(allErrs, validateProjection(&src.Projected.Sources[i], pp.Child("sources").Index(i))...)
		}
	case src.PersistentVolumeClaim != nil:
		if src.PersistentVolumeClaim.ClaimName == "" {
			allErrs = append(allErrs, field.Required(p.Child("persistentVolumeClaim", "claimName"), ""))
		}
	case src.NFS != nil:
		if src.NFS.Server == "" {
			allErrs = append(allErrs, field.Required(p.Child("nfs", "server"), ""))
		}
		if !strings.HasPrefix(src.NFS.Path, "/") {
			allErrs = append(allErrs, field.Invalid(p.Child("nfs", "path"), src.NFS.Path, "must be an absolute path"))
		}
	case src.CSI != nil:
		if src.CSI.Driver == "" {
			allErrs = append(allErrs, field.Required(p.Child("csi", "driver"), ""))
		}
	case src.Image != nil:
		if strings.TrimSpace(src.Image.Reference) == "" {
			allErrs = append(allErrs, field.Required(p.Child("image", "reference"), ""))
		}
	}
	return allErrs
}

func validateProjection(src *corev1.VolumeProjection, p *field.Path) field.ErrorList {
	set := setMembers(src)
	if len(set) == 0 {
		return field.ErrorList{field.Required(p, "must specify exactly 1 projection type")}
	}
	var allErrs field.ErrorList
	for _, extra := range set[1:] {
		allErrs = append(allErrs, field.Forbidden(p.Child(extra), "may not specify more than 1 volume type per source"))
	}
	switch {
	case src.ConfigMap != nil:
		if src.ConfigMap.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("configMap", "name"), ""))
		}
		allErrs = append(allErrs, validateKeyToPaths(src.ConfigMap.Items, p.Child("configMap", "items"))...)
	case src.Secret != nil:
		if src.Secret.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("secret", "name"), ""))
		}
		allErrs = append(allErrs, validateKeyToPaths(src.Secret.Items, p.Child("secret", "items"))...)
	case src.DownwardAPI != nil:
		allErrs = append(allErrs, validateDownwardAPIFiles(src.DownwardAPI.Items, p.Child("downwardAPI", "items"))...)
	case src.ServiceAccountToken != nil:
		tp := p.Child("serviceAccountToken")
		if src.ServiceAccountToken.Path == "" {
			allErrs = append(allErrs, field.Required(tp.Child("path"), ""))
		}
		if es := src.ServiceAccountToken.ExpirationSeconds; es != nil && *es < 600 {
			allErrs = append(allErrs, field.Invalid(tp.Child("expirationSeconds"), *es, "may not specify a duration less than 10 minutes"))
		}
	}
	return allErrs
}

func validateMode(mode *int32, p *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0777 || *mode < 0) {
		return field.ErrorList{field.Invalid(p, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateKeyToPaths(items []corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, it := range items {
		p := fldPath.Index(i)
		if it.Key == "" {
			allErrs = append(allErrs, field.Required(p.Child("key"), ""))
		}
		if it.Path == "" {
			allErrs = append(allErrs, field.Required(p.Child("path"), ""))
		} else {
			allErrs = append(allErrs, validateLocalDescendingPath(it.Path, p.Child("path"))...)
		}
		allErrs = append(allErrs, validateMode(it.Mode, p.Child("mode"))...)
	}
	return allErrs
}

func validateDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, it := range items {
		p := fldPath.Index(i)
		if it.Path == "" {
			allErrs = append(allErrs, field.Required(p.Child("path"), ""))
		} else {
			allErrs = append(allErrs, validateLocalDescendingPath(it.Path, p.Child("path"))...)
		}
		allErrs = append(allErrs, validateMode(it.Mode, p.Child("mode"))...)
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			allErrs = append(allErrs, field.Invalid(p, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		case it.FieldRef != nil:
			allErrs = append(allErrs, validateObjectFieldSelector(it.FieldRef, supportedVolumeFieldPaths, p.Child("fieldRef"))...)
		case it.ResourceFieldRef != nil:
			allErrs = append(allErrs, validateResourceFieldSelector(it.ResourceFieldRef, true, p.Child("resourceFieldRef"))...)
		default:
			allErrs = append(allErrs, field.Required(p, "one of fieldRef and resourceFieldRef is required"))
		}
	}
	return allErrs
}

// validateContainer checks one container; names collects the container
// names seen so far across init and regular containers.
func validateContainer(c *corev1.Container, spec *corev1.PodSpec, volumes map[string]*corev1.Volume, names sets.Set[string], isInit bool, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	namePath := p.Child("name")
	switch {
	case c.Name == "":
		allErrs = append(allErrs, field.Required(namePath, ""))
	case names.Has(c.Name):
		allErrs = append(allErrs, field.Duplicate(namePath, c.Name))
	default:
		allErrs = append(allErrs, dnsLabel(c.Name, namePath)...)
	}
	names.Insert(c.Name)

	if c.Image == "" {
		allErrs = append(allErrs, field.Required(p.Child("image"), ""))
	} else if c.Image != strings.TrimSpace(c.Image) {
		allErrs = append(allErrs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	allErrs = append(allErrs, oneOf(c.ImagePullPolicy, p.Child("imagePullPolicy"), supportedPullPolicies...)...)
	allErrs = append(allErrs, oneOf(c.TerminationMessagePolicy, p.Child("terminationMessagePolicy"), supportedTermMsgPolicy...)...)

	restartable := false
	if c.RestartPolicy != nil {
		if !isInit {
			allErrs = append(allErrs, field.Forbidden(p.Child("restartPolicy"), "may not be set for non-init containers"))
		} else {
			allErrs = append(allErrs, oneOf(*c.RestartPolicy, p.Child("restartPolicy"), corev1.ContainerRestartPolicyAlways)...)
			restartable = *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}

	allErrs = append(allErrs, validateContainerPorts(c.Ports, spec.HostNetwork, p.Child("ports"))...)
	allErrs = append(allErrs, validateEnv(c.Env, p.Child("env"))...)
	allErrs = append(allErrs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	allErrs = append(allErrs, validateVolumeMounts(c.VolumeMounts, volumes, p.Child("volumeMounts"))...)
	allErrs = append(allErrs, validateResources(&c.Resources, p.Child("resources"))...)

	if isInit && !restartable {
		for _, probe := range []struct {
			name string
			set  bool
		}{{"livenessProbe", c.LivenessProbe != nil}, {"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil}, {"lifecycle", c.Lifecycle != nil}} {
			if probe.set {
				allErrs = append(allErrs, field.Forbidden(p.Child(probe.name), "may not be set for init containers without restartPolicy=Always"))
			}
		}
	} else {
		allErrs = append(allErrs, validateProbe(c.LivenessProbe, true, false, p.Child("livenessProbe"))...)
		allErrs = append(allErrs, validateProbe(c.ReadinessProbe, false, true, p.Child("readinessProbe"))...)
		allErrs = append(allErrs, validateProbe(c.StartupProbe, true, false, p.Child("startupProbe"))...)
		allErrs = append(allErrs, validateLifecycle(c.Lifecycle, p.Child("lifecycle"))...)
	}
	if c.SecurityContext != nil {
		if c.SecurityContext.RunAsUser != nil {
			allErrs = append(allErrs, validID(*c.SecurityContext.RunAsUser, p.Child("securityContext", "runAsUser"))...)
		}
		if c.SecurityContext.RunAsGroup != nil {
			allErrs = append(allErrs, validID(*c.SecurityContext.RunAsGroup, p.Child("securityContext", "runAsGroup"))...)
		}
	}
	return allErrs
}

func validateContainerPorts(ports []corev1.ContainerPort, hostNetwork bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := fldPath.Index(i)
		if port.Name != "" {
			allErrs = append(allErrs, portName(port.Name, p.Child("name"))...)
			if names.Has(port.Name) {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		if port.ContainerPort == 0 {
			allErrs = append(allErrs, field.Required(p.Child("containerPort"), ""))
		} else {
			allErrs = append(allErrs, portNum(port.ContainerPort, p.Child("containerPort"))...)
		}
		if port.HostPort != 0 {
			allErrs = append(allErrs, portNum(port.HostPort, p.Child("hostPort"))...)
		}
		if hostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
			allErrs = append(allErrs, field.Invalid(p.Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
		}
		if port.HostIP != "" {
			allErrs = append(allErrs, validIP(port.HostIP, p.Child("hostIP"))...)
		}
		allErrs = append(allErrs, oneOf(port.Protocol, p.Child("protocol"), supportedPortProtocols...)...)
	}
	return allErrs
}

// validateEnv checks environment variables. Names follow the relaxed rule
// that is GA since Kubernetes 1.34: any printable ASCII except '='.
func validateEnv(vars []corev1.EnvVar, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ev := range vars {
		p := fldPath.Index(i)
		if ev.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			allErrs = append(allErrs, invalid(p.Child("name"), ev.Name, validation.IsRelaxedEnvVarName(ev.Name))...)
		}
		if ev.ValueFrom != nil {
			allErrs = append(allErrs, validateEnvVarSource(ev.ValueFrom, ev.Value != "", p.Child("valueFrom"))...)
		}
	}
	return allErrs
}

func validateEnvVarSource(src *corev1.EnvVarSource, hasValue bool, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if hasValue {
		allErrs = append(allErrs, field.Invalid(p, "", "may not be specified when `value` is not empty"))
	}
	switch n := len(setMembers(src)); {
	case n == 0:
		return append(allErrs, field.Invalid(p, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"))
	case n > 1:
		return append(allErrs, field.Invalid(p, "", "may not have more than one field specified at a time"))
	}
	switch {
	case src.FieldRef != nil:
		allErrs = append(allErrs, validateObjectFieldSelector(src.FieldRef, supportedEnvFieldPaths, p.Child("fieldRef"))...)
	case src.ResourceFieldRef != nil:
		allErrs = append(allErrs, validateResourceFieldSelector(src.ResourceFieldRef, false, p.Child("resourceFieldRef"))...)
	case src.ConfigMapKeyRef != nil:
		allErrs = append(allErrs, validateKeySelector(src.ConfigMapKeyRef.Name, src.ConfigMapKeyRef.Key, p.Child("configMapKeyRef"))...)
	case src.SecretKeyRef != nil:
		allErrs = append(allErrs, validateKeySelector(src.SecretKeyRef.Name, src.SecretKeyRef.Key, p.Child("secretKeyRef"))...)
	case src.FileKeyRef != nil:
		fp := p.Child("fileKeyRef")
		if src.FileKeyRef.VolumeName == "" {
			allErrs = append(allErrs, field.Required(fp.Child("volumeName"), ""))
		}
		if src.FileKeyRef.Path == "" {
			allErrs = append(allErrs, field.Required(fp.Child("path"), ""))
		}
		if src.FileKeyRef.Key == "" {
			allErrs = append(allErrs, field.Required(fp.Child("key"), ""))
		}
	}
	return allErrs
}

func validateKeySelector(name, key string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	}
	if key == "" {
		allErrs = append(allErrs, field.Required(p.Child("key"), ""))
	} else {
		allErrs = append(allErrs, invalid(p.Child("key"), key, validation.IsConfigMapKey(key))...)
	}
	return allErrs
}

func validateObjectFieldSelector(fs *corev1.ObjectFieldSelector, supported []string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if fs.APIVersion == "" {
		allErrs = append(allErrs, field.Required(p.Child("apiVersion"), ""))
	} else if fs.APIVersion != "v1" {
		allErrs = append(allErrs, field.NotSupported(p.Child("apiVersion"), fs.APIVersion, []string{"v1"}))
	}
	fp := p.Child("fieldPath")
	if fs.FieldPath == "" {
		return append(allErrs, field.Required(fp, ""))
	}
	if m := subscriptedFieldPath.FindStringSubmatch(fs.FieldPath); m != nil {
		if m[1] == "labels" {
			return append(allErrs, qualifiedName(m[2], fp)...)
		}
		allErrs = append(allErrs, invalid(fp, m[2], validation.IsQualifiedName(strings.ToLower(m[2])))...)
		return allErrs
	}
	for _, s := range supported {
		if fs.FieldPath == s {
			return allErrs
		}
	}
	return append(allErrs, field.NotSupported(fp, fs.FieldPath, supported))
}

func validateResourceFieldSelector(rs *corev1.ResourceFieldSelector, needContainer bool, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if needContainer && rs.ContainerName == "" {
		allErrs = append(allErrs, field.Required(p.Child("containerName"), ""))
	}
	switch {
	case rs.Resource == "":
		allErrs = append(allErrs, field.Required(p.Child("resource"), ""))
	case strings.HasPrefix(rs.Resource, "limits.hugepages-"), strings.HasPrefix(rs.Resource, "requests.hugepages-"):
	default:
		allErrs = append(allErrs, optionalOneOf(rs.Resource, p.Child("resource"), supportedResourceFields...)...)
	}
	if !rs.Divisor.IsZero() && rs.Divisor.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("divisor"), rs.Divisor.String(), apivalidation.IsNegativeErrorMsg))
	}
	return allErrs
}

func validateEnvFrom(from []corev1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ef := range from {
		p := fldPath.Index(i)
		if ef.Prefix != "" {
			allErrs = append(allErrs, invalid(p.Child("prefix"), ef.Prefix, validation.IsRelaxedEnvVarName(ef.Prefix))...)
		}
		switch n := len(setMembers(&ef)); {
		case n == 0:
			allErrs = append(allErrs, field.Invalid(p, "", "must specify one of: `configMapRef` or `secretRef`"))
		case n > 1:
			allErrs = append(allErrs, field.Invalid(p, "", "may not have more than one field specified at a time"))
		case ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == "":
			allErrs = append(allErrs, field.Required(p.Child("configMapRef", "name"), ""))
		case ef.SecretRef != nil && ef.SecretRef.Name == "":
			allErrs = append(allErrs, field.Required(p.Child("secretRef", "name"), ""))
		}
	}
	return allErrs
}

func validateVolumeMounts(mounts []corev1.VolumeMount, volumes map[string]*corev1.Volume, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		p := fldPath.Index(i)
		if m.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else if volumes[m.Name] == nil {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			allErrs = append(allErrs, field.Required(p.Child("mountPath"), ""))
		} else if paths.Has(m.MountPath) {
			allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
		if m.SubPath != "" {
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPath != "" && m.SubPathExpr != "" {
			allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
		if m.MountPropagation != nil {
			allErrs = append(allErrs, oneOf(*m.MountPropagation, p.Child("mountPropagation"),
				corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional)...)
		}
	}
	return allErrs
}

// isNativeResource reports whether a resource name belongs to Kubernetes
// itself: unprefixed or in the kubernetes.io domain.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func validateContainerResourceName(name corev1.ResourceName, p *field.Path) field.ErrorList {
	allErrs := qualifiedName(string(name), p)
	if len(allErrs) != 0 {
		return allErrs
	}
	if !strings.Contains(string(name), "/") {
		switch {
		case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage, isHugePages(name):
		default:
			allErrs = append(allErrs, field.Invalid(p, name, "must be a standard resource for containers"))
		}
	} else if !isNativeResource(name) && strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		allErrs = append(allErrs, field.Invalid(p, name, "doesn't follow extended resource name standard"))
	}
	return allErrs
}

func validateQuantity(q resource.Quantity, p *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(p, q.String(), apivalidation.IsNegativeErrorMsg)}
	}
	return nil
}

func validateResources(r *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	for _, name := range sortedKeys(r.Limits) {
		q, p := r.Limits[name], limPath.Key(string(name))
		allErrs = append(allErrs, validateContainerResourceName(name, p)...)
		allErrs = append(allErrs, validateQuantity(q, p)...)
		if !isNativeResource(name) && q.MilliValue()%1000 != 0 {
			allErrs = append(allErrs, field.Invalid(p, q.String(), "must be an integer"))
		}
	}
	for _, name := range sortedKeys(r.Requests) {
		q, p := r.Requests[name], reqPath.Key(string(name))
		allErrs = append(allErrs, validateContainerResourceName(name, p)...)
		allErrs = append(allErrs, validateQuantity(q, p)...)
		lim, hasLimit := r.Limits[name]
		switch {
		case !isNativeResource(name) || isHugePages(name):
			if !hasLimit {
				allErrs = append(allErrs, field.Forbidden(limPath, fmt.Sprintf("Limit must be set for non overcommitable resources: %s", name)))
			} else if q.Cmp(lim) != 0 {
				allErrs = append(allErrs, field.Invalid(p, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
			}
		case hasLimit && q.Cmp(lim) > 0:
			allErrs = append(allErrs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	for i, c := range r.Claims {
		if c.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("claims").Index(i).Child("name"), ""))
		}
	}
	return allErrs
}

// validateProbe checks a probe. mustSucceedOnce is set for liveness and
// startup probes, whose successThreshold must be 1; readiness probes may not
// carry their own terminationGracePeriodSeconds.
func validateProbe(probe *corev1.Probe, mustSucceedOnce, readiness bool, p *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	allErrs := validateHandler(setMembers(&probe.ProbeHandler), probe.Exec, probe.HTTPGet, probe.TCPSocket, p)
	if g := probe.GRPC; g != nil {
		allErrs = append(allErrs, portNum(g.Port, p.Child("grpc", "port"))...)
	}
	allErrs = append(allErrs, nonNegative(int64(probe.InitialDelaySeconds), p.Child("initialDelaySeconds"))...)
	allErrs = append(allErrs, nonNegative(int64(probe.TimeoutSeconds), p.Child("timeoutSeconds"))...)
	allErrs = append(allErrs, nonNegative(int64(probe.PeriodSeconds), p.Child("periodSeconds"))...)
	allErrs = append(allErrs, nonNegative(int64(probe.SuccessThreshold), p.Child("successThreshold"))...)
	allErrs = append(allErrs, nonNegative(int64(probe.FailureThreshold), p.Child("failureThreshold"))...)
	if mustSucceedOnce && probe.SuccessThreshold != 1 {
		allErrs = append(allErrs, field.Invalid(p.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
	}
	if probe.TerminationGracePeriodSeconds != nil {
		tp := p.Child("terminationGracePeriodSeconds")
		if readiness {
			allErrs = append(allErrs, field.Invalid(tp, *probe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		} else {
			allErrs = append(allErrs, positive(*probe.TerminationGracePeriodSeconds, tp)...)
		}
	}
	return allErrs
}

func validateLifecycle(lc *corev1.Lifecycle, p *field.Path) field.ErrorList {
	if lc == nil {
		return nil
	}
	var allErrs field.ErrorList
	for _, h := range []struct {
		name string
		h    *corev1.LifecycleHandler
	}{{"postStart", lc.PostStart}, {"preStop", lc.PreStop}} {
		if h.h == nil {
			continue
		}
		hp := p.Child(h.name)
		allErrs = append(allErrs, validateHandler(setMembers(h.h), h.h.Exec, h.h.HTTPGet, h.h.TCPSocket, hp)...)
		if h.h.Sleep != nil {
			allErrs = append(allErrs, nonNegative(h.h.Sleep.Seconds, hp.Child("sleep", "seconds"))...)
		}
	}
	return allErrs
}

// validateHandler checks a probe or lifecycle handler: exactly one action set.
func validateHandler(set []string, exec *corev1.ExecAction, httpGet *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, p *field.Path) field.ErrorList {
	if len(set) == 0 {
		return field.ErrorList{field.Required(p, "must specify a handler type")}
	}
	var allErrs field.ErrorList
	for _, extra := range set[1:] {
		allErrs = append(allErrs, field.Forbidden(p.Child(extra), "may not specify more than 1 handler type"))
	}
	if exec != nil && len(exec.Command) == 0 {
		allErrs = append(allErrs, field.Required(p.Child("exec", "command"), ""))
	}
	if httpGet != nil {
		hp := p.Child("httpGet")
		allErrs = append(allErrs, portNumOrName(httpGet.Port, hp.Child("port"))...)
		allErrs = append(allErrs, oneOf(httpGet.Scheme, hp.Child("scheme"), supportedURISchemes...)...)
		for i, h := range httpGet.HTTPHeaders {
			allErrs = append(allErrs, invalid(hp.Child("httpHeaders").Index(i).Child("name"), h.Name, validation.IsHTTPHeaderName(h.Name))...)
		}
	}
	if tcp != nil {
		allErrs = append(allErrs, portNumOrName(tcp.Port, p.Child("tcpSocket", "port"))...)
	}
	return allErrs
}
