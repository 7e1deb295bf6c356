// Package manifests checks the deployment artifacts with the libraries their own tools
// use, without a cluster or a container engine: the Kubernetes kustomization
// (deploy/kubernetes) rendered by kustomize and decoded strictly into the Kubernetes
// API types, docker-compose.yml loaded by the Compose specification's loader, and the
// Dockerfiles parsed by BuildKit's parser. It is a module of its own so that those
// libraries never enter the service's dependencies.
package manifests
