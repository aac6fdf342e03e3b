GREETING = "hello from the wheel"
