# A ping-pong client on one connection, driven by its stdin: connects to
# ADDR PORT (argv), prints "connected", then for each line read (seconds)
# runs 32-byte round trips for that long and prints "rounds N". Ends at EOF.
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("connected", flush=True)
for line in sys.stdin:
    n, end = 0, time.monotonic() + float(line)
    while time.monotonic() < end:
        s.sendall(b"x" * 32)
        got = b""
        while len(got) < 32:
            b = s.recv(64)
            if not b:
                sys.exit("the server closed the connection")
            got += b
        n += 1
    print("rounds", n, flush=True)
