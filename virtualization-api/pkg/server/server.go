// Package server builds virtualization-api's aggregated API server on k8s.io/apiserver: the
// group subresources.virtualization.deckhouse.io/v1alpha2 with its discovery and OpenAPI, behind
// the generic server's delegated authentication and authorization.
package server

import (
	"fmt"

	extensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	openapicommon "k8s.io/kube-openapi/pkg/common"

	subv1alpha2 "github.com/d8virt/virtualization-api/pkg/apis/subresources/v1alpha2"
	"github.com/d8virt/virtualization-api/pkg/registry"
	"github.com/d8virt/virtualization-api/pkg/subresource"
)

// Scheme and Codecs hold the group's kinds and the meta kinds.
var (
	Scheme = runtime.NewScheme()
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	if err := subv1alpha2.AddToScheme(Scheme); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}

// NewConfig is the generic server's configuration for this server: OpenAPI v2 and v3, the
// streams as long-running requests (no request timeout), and no /metrics on the serving port
// (the metrics have their own listener behind kube-rbac-proxy). The caller applies the serving,
// authentication and authorization options to it.
func NewConfig() *genericapiserver.RecommendedConfig {
	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	namer := openapinamer.NewDefinitionNamer(Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(definitions, namer)
	cfg.OpenAPIConfig.Info.Title = "virtualization-api"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(definitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "virtualization-api"
	cfg.EnableMetrics = false
	cfg.LongRunningFunc = LongRunning()
	return cfg
}

// definitions are the OpenAPI schemas: the meta kinds (from apiextensions-apiserver's generated
// ones, which hold them) and the group's.
func definitions(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
	defs := extensionsopenapi.GetOpenAPIDefinitions(ref)
	for name, def := range subv1alpha2.GetOpenAPIDefinitions(ref) {
		defs[name] = def
	}
	return defs
}

// LongRunning says which requests are streams: the streaming subresources (and watches).
func LongRunning() request.LongRunningRequestCheck {
	streams := sets.New[string]()
	for _, s := range subresource.All {
		if s.Stream {
			streams.Insert(s.Name)
		}
	}
	return genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString(sets.List(streams)...))
}

// New builds the server from a completed configuration and installs the group.
func New(cfg genericapiserver.CompletedConfig, deps registry.Deps) (*genericapiserver.GenericAPIServer, error) {
	s, err := cfg.New("virtualization-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("generic API server: %w", err)
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(subv1alpha2.GroupName, Scheme, runtime.NewParameterCodec(Scheme), Codecs)
	group.VersionedResourcesStorageMap[subv1alpha2.SchemeGroupVersion.Version] = registry.Storage(deps)
	if err := s.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("install %s: %w", subv1alpha2.SchemeGroupVersion, err)
	}
	return s, nil
}
