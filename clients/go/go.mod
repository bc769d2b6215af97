module github.com/ratekeeper/ratekeeper/clients/go

go 1.19
