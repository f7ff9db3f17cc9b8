package reliability

func proxyRole() int { return 0 }
