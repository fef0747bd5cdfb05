import RelayCore
import Testing
@testable import RelayStore

@Suite struct StoreNotificationTests {
    @Test func everyNotificationReadsBackFromItsChannelAndPayload() {
        let all: [StoreNotification] = [
            .token(id: 42), .device(DeviceID("d-1")!), .turnSecret(realm: "wimz"), .push(DeviceID("d-2")!),
            .liveActivity(DeviceID("d-3")!), .runEnded(DeviceID("d-4")!),
            .claim(node: "node-a:8080", devices: [DeviceID("d1")!, DeviceID("d2")!]), .handoff(toNode: "node-b:8080"),
        ]
        for notification in all {
            #expect(StoreNotification(PGNotification(channel: notification.channel, payload: notification.payload)) == notification)
        }
        // The payloads the SQL triggers of migrations/0001_initial.sql send.
        #expect(StoreNotification(PGNotification(channel: "wimz_credentials", payload: "token:7")) == .token(id: 7))
        #expect(StoreNotification(PGNotification(channel: "wimz_credentials", payload: "turn_secret:wimz")) == .turnSecret(realm: "wimz"))
        // And migrations/0007_push_registrations.sql's.
        #expect(StoreNotification(PGNotification(channel: "wimz_credentials", payload: "push:robot-1")) == .push(DeviceID("robot-1")!))
    }

    @Test func payloadsOutsideTheGrammarAreIgnored() {
        for (channel, payload) in [("wimz_credentials", "token:x"), ("wimz_credentials", "token"), ("wimz_credentials", "bogus:1"), ("wimz_credentials", "push:bad id"),
                                   ("wimz_cluster", "claim"), ("wimz_cluster", "handoff a b"), ("other", "token:1")] {
            #expect(StoreNotification(PGNotification(channel: channel, payload: payload)) == nil)
        }
    }
}
