module github.com/d8virt/kube-api-rewriter

go 1.26.0
