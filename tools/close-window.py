#!/usr/bin/python3
"""Asks an X window to close the way a window manager's close button does: an ICCCM
WM_PROTOCOLS client message carrying WM_DELETE_WINDOW (`xdotool windowclose` destroys the
window instead, which a video sink takes for a crash). For the preview tests, which run under
Xvfb with no window manager.   Usage: close-window.py WINDOW_ID   (DISPLAY from the environment)
"""
import ctypes
import sys

xlib = ctypes.cdll.LoadLibrary("libX11.so.6")
xlib.XOpenDisplay.restype = ctypes.c_void_p
xlib.XOpenDisplay.argtypes = [ctypes.c_char_p]
xlib.XInternAtom.restype = ctypes.c_ulong
xlib.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]


class ClientMessage(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("message_type", ctypes.c_ulong),
                ("format", ctypes.c_int), ("data", ctypes.c_long * 5)]


class Event(ctypes.Union):  # XEvent: 24 longs
    _fields_ = [("client", ClientMessage), ("pad", ctypes.c_long * 24)]


xlib.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.POINTER(Event)]
display = xlib.XOpenDisplay(None)
if not display:
    sys.exit("close-window: cannot open the display")
window = int(sys.argv[1], 0)
event = Event()
event.client.type = 33  # ClientMessage
event.client.window = window
event.client.message_type = xlib.XInternAtom(display, b"WM_PROTOCOLS", 0)
event.client.format = 32
event.client.data[0] = xlib.XInternAtom(display, b"WM_DELETE_WINDOW", 0)
event.client.data[1] = 0  # CurrentTime
ok = xlib.XSendEvent(display, window, 0, 0, ctypes.byref(event))
xlib.XFlush(display)
xlib.XCloseDisplay(display)
sys.exit(0 if ok else 1)
