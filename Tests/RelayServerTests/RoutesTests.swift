import Foundation
import Testing
@testable import RelayServer
import WimzProtocol
import RelayTestSupport

/// The one route table, in process: what it resolves, what it refuses, and that it is exactly
/// what docs/openapi.json documents.
@Suite struct RoutesTests {
    @Test func everyRoutedPathIsDocumentedAndEveryDocumentedPathRouted() throws {
        let url = TestEnvironment.repositoryRoot.appendingPathComponent("docs/openapi.json")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let verbs: Set = ["get", "head", "post", "put", "patch", "delete", "options"]
        let documented = Set(paths.flatMap { path, item in item.keys.filter(verbs.contains).map { "\($0.uppercased()) \(path)" } })
        let routed = Set(Routes.table.flatMap { route in
            route.methods.map { "\($0) \(route.pattern.replacingOccurrences(of: "{path+}", with: "{path}"))" }
        })
        #expect(routed.subtracting(documented).sorted() == [], "routed, not documented")
        #expect(documented.subtracting(routed).sorted() == [], "documented, not routed")
        // Query arguments a route reads are declared in the table and in the document.
        for route in Routes.table where !route.query.isEmpty {
            let item = paths[route.pattern] ?? [:]
            for method in route.methods {
                let parameters = (item[method.lowercased()] as? [String: Any])?["parameters"] as? [[String: Any]] ?? []
                let documentedQuery = Set(parameters.filter { $0["in"] as? String == "query" }.compactMap { $0["name"] as? String })
                #expect(Set(route.query) == documentedQuery, "\(method) \(route.pattern)")
            }
        }
    }

    /// Every device resource the protocol names is routed, at the path the clients build.
    @Test func everyDeviceResourceOfTheProtocolIsRouted() {
        for resource in WimzProtocol.Path.DeviceResource.allCases {
            let pattern = WimzProtocol.Path.devicePattern(resource)
            #expect(Routes.table.contains { $0.pattern == pattern }, "\(pattern)")
            #expect(WimzProtocol.Path.device("d1", resource, ["x"]) == "/api/devices/d1/\(resource.rawValue)/x")
        }
    }

    func resolve(_ method: String, _ path: String) -> String {
        switch Routes.resolve(method: method, rawPath: path) {
        case .found(let route, let parameters):
            return "\(route.pattern) \(parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))"
        case .methodNotAllowed(let allowed, _): return "405 \(allowed.joined(separator: ", "))"
        case .notFound: return "404"
        }
    }

    @Test func pathsResolveToTheirRouteOr404Or405() {
        #expect(resolve("GET", "/healthz") == "/healthz ")
        #expect(resolve("POST", "/healthz") == "405 GET, HEAD")
        #expect(resolve("GET", "/api/devices/robot-42/status") == "/api/devices/{device_id}/status device_id=robot-42")
        // A device id stays as sent (the bytes the balancer hashes on): the router refuses this one.
        #expect(resolve("GET", "/api/devices/a%2Db/status") == "/api/devices/{device_id}/status device_id=a%2Db")
        #expect(resolve("GET", "/api/devices/d/robot") == "/api/devices/{device_id}/robot device_id=d")
        // The robot's path is parsed once, by the route: as sent, escapes and all.
        #expect(resolve("PATCH", "/api/devices/d/robot/programs/x/y") == "/api/devices/{device_id}/robot/{path+} device_id=d,path+=/programs/x/y")
        #expect(resolve("GET", "/api/devices/d/robot/%2e%2e/x") == "/api/devices/{device_id}/robot/{path+} device_id=d,path+=/%2e%2e/x")
        #expect(resolve("GET", "/api/devices/d/robot/") == "/api/devices/{device_id}/robot/{path+} device_id=d,path+=/")
        #expect(resolve("GET", "/api/devices/d/robots") == "404")
        #expect(resolve("OPTIONS", "/api/devices/d/robot/mode") == "405 GET, HEAD, POST, PUT, PATCH, DELETE")
        #expect(resolve("DELETE", "/api/devices/d/app-tokens/7") == "/api/devices/{device_id}/app-tokens/{token_id} device_id=d,token_id=7")
        #expect(resolve("GET", "/admin/devices") == "/admin/devices ")
        #expect(resolve("DELETE", "/admin/devices") == "405 GET, POST")
        #expect(resolve("POST", "/admin/devices/x/disable") == "/admin/devices/{id}/disable id=x")
        #expect(resolve("GET", "/admin/devices//presence") == "404")
        #expect(resolve("GET", "/api/devices/x") == "404")
        #expect(resolve("GET", "/nope") == "404")
    }
}
