// Debian's sarama (golang-github-shopify-sarama-dev 1.22.1) ClusterAdmin, offset manager and
// producer against the broker, for the interop scenario `admin-sarama`.
//
//	sarama-admin BOOTSTRAP PREFIX
//
// Prints one JSON object of outcomes on stdout: each call's result, or its error's text.
// Built by interop/install with Debian's Go in GOPATH mode (GOPATH=/usr/share/gocode), so it
// needs no module download.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/Shopify/sarama"
)

func errText(err error) interface{} {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: sarama-admin BOOTSTRAP PREFIX")
		os.Exit(2)
	}
	bootstrap, p := os.Args[1], os.Args[2]
	out := map[string]interface{}{}
	defer func() {
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
	}()

	conf := sarama.NewConfig()
	// 2.1: the versions this broker serves (OffsetCommit v2+, CreateTopics v2, ...).
	conf.Version = sarama.V2_1_0_0
	conf.ClientID = "interop-sarama"
	conf.Admin.Timeout = 10 * time.Second
	conf.Producer.Return.Successes = true
	conf.Producer.RequiredAcks = sarama.WaitForAll
	conf.Producer.Partitioner = sarama.NewManualPartitioner
	// sarama before 1.27 commits with OffsetCommit v1 unless a retention is set (README).
	conf.Consumer.Offsets.Retention = 24 * time.Hour

	admin, err := sarama.NewClusterAdmin([]string{bootstrap}, conf)
	if err != nil {
		out["connect"] = errText(err)
		os.Exit(1)
	}
	defer admin.Close()
	main := p + "-orders"
	retention := "60000"
	out["create"] = errText(admin.CreateTopic(main, &sarama.TopicDetail{
		NumPartitions: 3, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retention},
	}, false))
	out["create_again"] = errText(admin.CreateTopic(main, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false))
	out["create_rf3"] = errText(admin.CreateTopic(p+"-rf3", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 3}, false))
	out["validate_only"] = errText(admin.CreateTopic(p+"-dry", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, true))

	if md, err := admin.DescribeTopics([]string{main, p + "-dry"}); err != nil {
		out["describe_topics"] = errText(err)
	} else {
		topics := map[string]interface{}{}
		for _, t := range md {
			if t.Err != sarama.ErrNoError {
				topics[t.Name] = t.Err.Error()
				continue
			}
			leaders := []int32{}
			for _, part := range t.Partitions {
				leaders = append(leaders, part.Leader)
			}
			topics[t.Name] = leaders
		}
		out["describe_topics"] = topics
	}
	if brokers, controller, err := admin.DescribeCluster(); err != nil {
		out["cluster"] = errText(err)
	} else {
		ids := []int32{}
		for _, b := range brokers {
			ids = append(ids, b.ID())
		}
		out["cluster"] = map[string]interface{}{"brokers": ids, "controller": controller}
	}
	compact := "compact"
	out["alter"] = errText(admin.AlterConfig(sarama.TopicResource, main, map[string]*string{"cleanup.policy": &compact}, false))
	out["grow"] = errText(admin.CreatePartitions(main, 5, nil, false))
	out["shrink"] = errText(admin.CreatePartitions(main, 2, nil, false))

	// Ten records into partition 0, then the first four deleted.
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, conf)
	if err != nil {
		out["produce"] = errText(err)
	} else {
		last := int64(-1)
		for i := 0; i < 10; i++ {
			_, offset, err := producer.SendMessage(&sarama.ProducerMessage{Topic: main, Partition: 0, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))})
			if err != nil {
				out["produce"] = errText(err)
				break
			}
			last = offset
		}
		out["last_offset"] = last
		producer.Close()
	}
	out["delete_records"] = errText(admin.DeleteRecords(main, map[int32]int64{0: 4}))
	client, err := sarama.NewClient([]string{bootstrap}, conf)
	if err == nil {
		oldest, err := client.GetOffset(main, 0, sarama.OffsetOldest)
		if err != nil {
			out["oldest"] = errText(err)
		} else {
			out["oldest"] = oldest
		}
		// A commit through the offset manager (OffsetCommit v2).
		group := p + "-group"
		if om, err := sarama.NewOffsetManagerFromClient(group, client); err != nil {
			out["commit"] = errText(err)
		} else if pom, err := om.ManagePartition(main, 0); err != nil {
			out["commit"] = errText(err)
		} else {
			pom.MarkOffset(7, "")
			pom.Close()
			out["commit"] = errText(om.Close())
		}
		client.Close()
		if groups, err := admin.ListConsumerGroups(); err != nil {
			out["groups"] = errText(err)
		} else {
			out["group_listed"] = groups[group]
		}
		if desc, err := admin.DescribeConsumerGroups([]string{group}); err != nil {
			out["describe_group"] = errText(err)
		} else {
			out["describe_group"] = []string{desc[0].GroupId, desc[0].State}
		}
		if r, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{main: {0}}); err != nil {
			out["group_offsets"] = errText(err)
		} else if b := r.GetBlock(main, 0); b != nil {
			out["group_offsets"] = b.Offset
		}
	} else {
		out["client"] = errText(err)
	}
	out["delete"] = errText(admin.DeleteTopic(main))
	// Last, as it ends the connection: ListTopics (and DescribeConfig) send DescribeConfigs
	// v0, which Kafka 4 removed (KIP-896), so the broker closes the connection.
	if topics, err := admin.ListTopics(); err != nil {
		out["list_topics"] = errText(err)
	} else {
		names := []string{}
		for name := range topics {
			names = append(names, name)
		}
		sort.Strings(names)
		out["list_topics"] = names
	}
}
