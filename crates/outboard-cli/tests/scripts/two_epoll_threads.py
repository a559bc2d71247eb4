# Two threads, each serving in epoll on a set of its own: thread i listens on
# port BASE + i (argv[1]) and echoes. Prints "ready" once both listen.
import select, socket, sys, threading
base = int(sys.argv[1])
def worker(i):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", base + i))
    ls.listen(8)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    conns = {}
    up[i].set()
    while True:
        for fd, ev in ep.poll(5.0):
            if fd == ls.fileno():
                c, _ = ls.accept()
                c.setblocking(False)
                conns[c.fileno()] = c
                ep.register(c.fileno(), select.EPOLLIN)
            else:
                c = conns[fd]
                try:
                    b = c.recv(4096)
                except BlockingIOError:
                    continue
                if not b:
                    ep.unregister(fd)
                    conns.pop(fd).close()
                else:
                    c.sendall(b)
up = [threading.Event(), threading.Event()]
for i in (0, 1):
    threading.Thread(target=worker, args=(i,), daemon=True).start()
for e in up:
    e.wait()
# One line from one thread: two threads printing at once interleave their words.
print("ready", flush=True)
threading.Event().wait()
