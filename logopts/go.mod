module github.com/d8virt/logopts

go 1.26.0
