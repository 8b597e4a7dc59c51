module github.com/d8virt/kubevirt-core

go 1.26.0
