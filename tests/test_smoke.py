from conftest import ServerProcess
import httpx

def test_server_process_roundtrip(server: ServerProcess) -> None:
    r = httpx.post(server.url + "/api/v1/lineage", content=b'{"job":{"namespace":"a","name":"b"}}',
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 202
    rid = r.json()["delivery_id"]
    assert httpx.get(f"{server.url}/api/v1/deliveries/{rid}").json()["state"] == "accepted"

def test_client(client) -> None:
    r = client.post("/api/v1/lineage/batch", content=b'[{"job":{"namespace":"a","name":"b"}}]',
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 202, r.text
