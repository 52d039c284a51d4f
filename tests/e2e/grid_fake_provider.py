"""A local stand-in for ElectricityMaps and OpenEI, for end-to-end tests (tests/e2e/prometheus.sh).

Serves, on 127.0.0.1 and a free port (printed on stdout as "port N" once it listens):
  GET /v3/carbon-intensity/latest   {"zone", "carbonIntensity": INTENSITY, "datetime", ...}
  GET /v3/carbon-intensity/history  {"zone", "history": [24 hours of {"datetime", "carbonIntensity"}]}
  GET /utility_rates                {"items": [{"label": LABEL, "energyratestructure": [[{"rate": RATE}]],
                                     "energyweekdayschedule", "energyweekendschedule"}]} (every hour
                                     of the year in period 0, so the price is RATE at any time)
Anything else is a 404. The ElectricityMaps routes need the header auth-token and OpenEI the query
parameter api_key to equal --key when one is given (a 401 otherwise, as the services answer).

usage: python3 grid_fake_provider.py [--intensity G_PER_KWH] [--rate PER_KWH] [--label LABEL]
                                     [--key KEY]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intensity", type=float, default=420.0, help="gCO2eq/kWh of the latest value")
    ap.add_argument("--rate", type=float, default=0.25, help="price per kWh of the rate's only period")
    ap.add_argument("--label", default="5f1a2b3c4d5e6f7a8b9c0d1e", help="the OpenEI rate's label")
    ap.add_argument("--key", default=None, help="the API key both services expect")
    a = ap.parse_args()

    def latest() -> dict:
        now = dt.datetime.now(dt.timezone.utc).replace(minute=0, second=0, microsecond=0)
        return {"zone": "US-MIDW-MISO", "carbonIntensity": a.intensity,
                "datetime": now.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "emissionFactorType": "direct",
                "isEstimated": False}

    def history() -> dict:
        now = dt.datetime.now(dt.timezone.utc).replace(minute=0, second=0, microsecond=0)
        hours = [now - dt.timedelta(hours=23 - i) for i in range(24)]
        return {"zone": "US-MIDW-MISO", "history": [
            {"zone": "US-MIDW-MISO", "carbonIntensity": a.intensity + i, "datetime": h.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
             "emissionFactorType": "direct", "isEstimated": False} for i, h in enumerate(hours)]}

    def rates() -> dict:
        flat = [[0] * 24 for _ in range(12)]
        return {"items": [{"label": a.label, "name": "Test rate", "utility": "Test Utility", "sector": "Residential",
                           "energyratestructure": [[{"rate": a.rate, "unit": "kWh"}]],
                           "energyweekdayschedule": flat, "energyweekendschedule": flat}]}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet, and no key in any log
            pass

        def do_GET(self) -> None:
            u = urllib.parse.urlsplit(self.path)
            q = dict(urllib.parse.parse_qsl(u.query))
            em = u.path.startswith("/v3/carbon-intensity/")
            given = self.headers.get("auth-token") if em else q.get("api_key")
            if a.key is not None and given != a.key and u.path in (
                    "/v3/carbon-intensity/latest", "/v3/carbon-intensity/history", "/utility_rates"):
                code, body = 401, {"error": "invalid API key"}
            elif u.path == "/v3/carbon-intensity/latest":
                code, body = 200, latest()
            elif u.path == "/v3/carbon-intensity/history":
                code, body = 200, history()
            elif u.path == "/utility_rates":
                code, body = 200, rates()
            else:
                code, body = 404, {"error": f"no route {u.path}"}
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    print(f"port {httpd.server_address[1]}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
