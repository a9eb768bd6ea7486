package node

import (
	corev1 "k8s.io/api/core/v1"
)

// Secrets returns the names of the Secrets pod uses: in volumes (secret, projected), in environment
// variables and envFrom of every container, and as image pull secrets.
func Secrets(pod *corev1.Pod) []string {
	var names []string
	add := func(n string) {
		if n != "" {
			names = append(names, n)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(s.Name)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			add(v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		}
	}
	visitEnv(pod, func(from *corev1.EnvFromSource, env *corev1.EnvVar) {
		if from != nil && from.SecretRef != nil {
			add(from.SecretRef.Name)
		}
		if env != nil && env.ValueFrom != nil && env.ValueFrom.SecretKeyRef != nil {
			add(env.ValueFrom.SecretKeyRef.Name)
		}
	})
	return names
}

// ConfigMaps returns the names of the ConfigMaps pod uses: in volumes (configMap, projected) and in
// environment variables and envFrom of every container.
func ConfigMaps(pod *corev1.Pod) []string {
	var names []string
	add := func(n string) {
		if n != "" {
			names = append(names, n)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			add(v.ConfigMap.Name)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					add(src.ConfigMap.Name)
				}
			}
		}
	}
	visitEnv(pod, func(from *corev1.EnvFromSource, env *corev1.EnvVar) {
		if from != nil && from.ConfigMapRef != nil {
			add(from.ConfigMapRef.Name)
		}
		if env != nil && env.ValueFrom != nil && env.ValueFrom.ConfigMapKeyRef != nil {
			add(env.ValueFrom.ConfigMapKeyRef.Name)
		}
	})
	return names
}

// visitEnv calls f for each envFrom source and each env var of every container, init and ephemeral
// containers included.
func visitEnv(pod *corev1.Pod, f func(*corev1.EnvFromSource, *corev1.EnvVar)) {
	visit := func(envFrom []corev1.EnvFromSource, env []corev1.EnvVar) {
		for i := range envFrom {
			f(&envFrom[i], nil)
		}
		for i := range env {
			f(nil, &env[i])
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.EnvFrom, c.Env)
	}
}

// Claims returns the names of the PersistentVolumeClaims pod mounts.
func Claims(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return names
}
